// An AI route's request body, read (src/ai/request.ts): what it asks for, refused with a reason
// when it cannot be read the way every upstream reads it, and the body forwarded with the
// reservation's ceiling and a stream's usage asked for, every other byte as the client sent it.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { OPERATIONS } from "../../src/ai/operations.js";
import { ANTHROPIC_TOOLS_TOKENS, forwardedBody, parseAiRequest } from "../../src/ai/request.js";
import { outputCeiling, reservationOf } from "../../src/ai/reserve.js";
import type { AiSettings } from "../../src/ai/settings.js";

const op = (format: keyof typeof OPERATIONS, name: string) =>
  OPERATIONS[format].find((o) => o.name === name)!;
const CHAT = op("openai", "chat");
const COMPLETION = op("openai", "completion");
const MESSAGE = op("anthropic", "message");
const RESPONSE = op("responses", "response");

const settings = (over: Partial<AiSettings> = {}): AiSettings => ({
  format: "openai",
  maxOutput: 4096,
  clamp: false,
  minOutput: 16,
  outputField: "max_completion_tokens",
  imageTokens: 1600,
  referencedInputTokens: 128_000,
  ...over,
});

const parse = (body: string, operation = CHAT, s = settings()) =>
  parseAiRequest(Buffer.from(body), operation, s);
const ok = (body: string, operation = CHAT, s = settings()) => {
  const r = parse(body, operation, s);
  if (!r.ok) throw new Error(r.detail);
  return r.request;
};

describe("parseAiRequest", () => {
  it("reads the model, the ceiling, the choices and the stream flag", () => {
    const r = ok(
      '{"model":"gpt-4o","stream":true,"n":3,"max_tokens":50,"max_completion_tokens":70,"messages":[]}',
    );
    expect(r).toMatchObject({ model: "gpt-4o", stream: true, ceiling: 70, choices: 3 });
    // best_of generates that many completions, whatever n says.
    expect(ok('{"prompt":"x","best_of":5,"n":2,"max_tokens":10}', COMPLETION).choices).toBe(5);
    expect(ok('{"max_tokens":null,"n":null,"messages":[]}')).toMatchObject({
      ceiling: undefined,
      choices: 1,
    });
  });

  it("refuses what upstreams would read differently, saying why", () => {
    expect(parse("[1,2]")).toEqual({ ok: false, detail: expect.stringMatching(/must be a JSON object/) });
    expect(parse('{"model":1}')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/"model" must be a string/),
    });
    expect(parse('{"stream":"true"}')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/true or false/),
    });
    expect(parse('{"max_tokens":1.5}')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/whole number/),
    });
    expect(parse('{"max_tokens":0}')).toMatchObject({ ok: false });
    expect(parse('{"n":-1}')).toMatchObject({ ok: false });
    expect(parse('{"stream_options":[1]}')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/object/),
    });
    expect(parse('{"model":"a","model":"b"}')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/gives "model" more than once/),
    });
    expect(parse('{"model":"a","mod\\u0065l":"b"}')).toMatchObject({ ok: false });
    expect(parseAiRequest(Buffer.from([0x7b, 0xff, 0x7d]), CHAT, settings())).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/UTF-8/),
    });
    expect(parse('\ufeff{"model":"a"}')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/byte order mark/),
    });
    expect(parse('{"model":"a"')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/not valid JSON/),
    });
  });

  it("never throws on any bytes a client sends (fuzz)", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 200 }),
          fc.json().map((j) => Buffer.from(j)),
        ),
        (bytes) => {
          for (const o of [CHAT, COMPLETION, MESSAGE, RESPONSE]) {
            const r = parseAiRequest(Buffer.from(bytes), o, settings());
            if (r.ok) expect(r.request.promptBound).toBeGreaterThanOrEqual(1);
            else expect(r.detail.length).toBeGreaterThan(0);
          }
        },
      ),
      { numRuns: 3000 },
    );
  });

  it("bounds the prompt by the body's bytes, an image by image_tokens instead of its bytes", () => {
    const text = '{"model":"m","messages":[{"role":"user","content":"hello"}]}';
    expect(ok(text).promptBound).toBe(Buffer.byteLength(text));
    const image = `data:image/png;base64,${"A".repeat(100_000)}`;
    const withImage = JSON.stringify({
      model: "m",
      messages: [
        {
          role: "user",
          content: [
            { type: "image_url", image_url: { url: image } },
            { type: "text", text: "?" },
          ],
        },
      ],
    });
    const r = ok(withImage);
    expect(r.images).toBe(1);
    // Its payload, the data URL, is counted as the image; the part's other strings as text.
    expect(r.promptBound).toBe(Buffer.byteLength(withImage) - Buffer.byteLength(image) + 1600);
    // Anthropic's images (base64 or by URL) and its tools' system prompt.
    const anthropic = JSON.stringify({
      model: "claude",
      max_tokens: 10,
      tools: [{ name: "t", input_schema: { type: "object" } }],
      messages: [
        { role: "user", content: [{ type: "image", source: { type: "url", url: "https://x/y.png" } }] },
      ],
    });
    const a = ok(anthropic, MESSAGE, settings({ format: "anthropic" }));
    expect(a.images).toBe(1);
    expect(a.promptBound).toBe(
      Buffer.byteLength(anthropic) - Buffer.byteLength("https://x/y.png") + 1600 + ANTHROPIC_TOOLS_TOKENS,
    );
  });
});

describe("the ceiling and the forwarded body", () => {
  it("holds a request to max_output, and writes it where none is named", () => {
    const s = settings({ maxOutput: 1000 });
    expect(outputCeiling(ok('{"max_tokens":5000}'), s)).toBe(1000);
    expect(outputCeiling(ok('{"max_tokens":500}'), s)).toBe(500);
    expect(outputCeiling(ok("{}"), s)).toBe(1000);
    const none = ok('{"model":"m", "messages":[]}');
    expect(forwardedBody(none, 1000, s).toString()).toBe(
      '{"model":"m", "messages":[],"max_completion_tokens":1000}',
    );
    expect(forwardedBody(none, 1000, settings({ outputField: "max_tokens" })).toString()).toContain(
      '"max_tokens":1000',
    );
    expect(forwardedBody(ok('{"prompt":"x"}', COMPLETION), 16, s).toString()).toBe(
      '{"prompt":"x","max_tokens":16}',
    );
    expect(forwardedBody(ok('{"max_tokens":null}', MESSAGE), 9, s).toString()).toBe('{"max_tokens":9}');
    expect(forwardedBody(ok("{}", RESPONSE), 9, s).toString()).toBe('{"max_output_tokens":9}');
  });

  it("forwards one ceiling field, the one the upstream reads, at what was asked but at most the output", () => {
    const text = '{ "seed": 12345678901234567890, "max_tokens": 8000, "max_completion_tokens": 300 }';
    // Asked 8,000 of the API (the larger), held to 500; the other field taken out.
    expect(forwardedBody(ok(text), 500, settings()).toString()).toBe(
      '{ "seed": 12345678901234567890, "max_completion_tokens": 500 }',
    );
    const same = ok('{"max_completion_tokens": 100}');
    expect(forwardedBody(same, 500, settings())).toBe(same.bytes);
    // Named under the other field: moved to the one the upstream reads, never raised.
    expect(forwardedBody(ok('{"max_tokens":100}'), 500, settings()).toString()).toBe(
      '{"max_completion_tokens":100}',
    );
    expect(
      forwardedBody(ok('{"max_completion_tokens":5}'), 5, settings({ outputField: "max_tokens" })).toString(),
    ).toBe('{"max_tokens":5}');
    // A vendor's own ceiling (llama.cpp's n_predict) counts, and is held to the output too.
    const vendor = ok('{"max_tokens":16,"n_predict":20000}');
    expect(vendor.ceiling).toBe(20000);
    expect(forwardedBody(vendor, 1000, settings({ outputField: "max_tokens" })).toString()).toBe(
      '{"max_tokens":16,"n_predict":1000}',
    );
    expect(parse('{"n_predict":-1}')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/"n_predict"/),
    });
  });

  it("asks an OpenAI stream for its usage, keeping the client's other stream options", () => {
    expect(forwardedBody(ok('{"stream":true,"max_completion_tokens":5}'), 5, settings()).toString()).toBe(
      '{"stream":true,"max_completion_tokens":5,"stream_options":{"include_usage":true}}',
    );
    expect(
      forwardedBody(
        ok('{"stream":true,"max_completion_tokens":5,"stream_options":{"include_usage":false,"x":1}}'),
        5,
        settings(),
      ).toString(),
    ).toBe('{"stream":true,"max_completion_tokens":5,"stream_options":{"include_usage":true,"x":1}}');
    // Not a stream, or a format that always reports: untouched.
    const plain = ok('{"max_completion_tokens":5}');
    expect(forwardedBody(plain, 5, settings())).toBe(plain.bytes);
    const anthropic = ok('{"stream":true,"max_tokens":5}', MESSAGE);
    expect(forwardedBody(anthropic, 5, settings())).toBe(anthropic.bytes);
  });
});

describe("what a request holds that no field says (found by an attack)", () => {
  it("an image counts as one only where the format puts one, and only its payload", () => {
    const text = "x".repeat(100_000);
    for (const body of [
      { type: "image_url", messages: [{ role: "user", content: text }] },
      { messages: [{ role: "user", type: "image_url", content: text }] },
      {
        messages: [
          { role: "user", content: [{ type: "image_url", image_url: { url: "https://x/y.png" }, text }] },
        ],
      },
      { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: text } }] }] },
      {
        tools: [
          { type: "function", function: { parameters: { default: { type: "image_url", image_url: text } } } },
        ],
        messages: [],
      },
    ]) {
      const bytes = Buffer.byteLength(JSON.stringify(body));
      expect(ok(JSON.stringify(body)).promptBound, JSON.stringify(body).slice(0, 80)).toBeGreaterThan(
        bytes - 100,
      );
    }
  });

  it("a legacy completion's batch of prompts generates a completion per prompt", () => {
    expect(ok('{"prompt":["a","b","c"],"n":2,"max_tokens":10}', COMPLETION).choices).toBe(6);
    expect(ok('{"prompt":[1,2,3],"max_tokens":10}', COMPLETION).choices).toBe(1);
    expect(ok('{"prompt":[[1,2],[3]],"max_tokens":10}', COMPLETION).choices).toBe(2);
  });

  it("input the body only refers to is reserved at referenced_input_tokens", () => {
    const base = ok(
      '{"input":"continue","max_output_tokens":10}',
      RESPONSE,
      settings({ format: "responses" }),
    );
    const chained = ok(
      '{"input":"continue","max_output_tokens":10,"previous_response_id":"resp_1"}',
      RESPONSE,
      settings({ format: "responses" }),
    );
    expect(chained.promptBound - base.promptBound).toBeGreaterThanOrEqual(128_000);
  });

  it("reserves ai.referenced_input_tokens for each stored file or item a request names", () => {
    const R = 128_000;
    const chat = (content: unknown) =>
      ok(JSON.stringify({ model: "m", max_tokens: 10, messages: [{ role: "user", content }] })).promptBound;
    const bare = chat([{ type: "text", text: "summarise" }]);
    expect(
      chat([
        { type: "text", text: "summarise" },
        { type: "file", file: { file_id: "file-abc" } },
      ]) - bare,
    ).toBeGreaterThanOrEqual(R);
    const audio = ok(
      JSON.stringify({ model: "m", messages: [{ role: "assistant", audio: { id: "audio_1" } }] }),
    ).promptBound;
    expect(audio).toBeGreaterThanOrEqual(R);

    const responses = (input: unknown) =>
      ok(JSON.stringify({ model: "m", input }), RESPONSE, settings({ format: "responses" })).promptBound;
    const text = responses([{ role: "user", content: [{ type: "input_text", text: "hi" }] }]);
    for (const part of [
      { type: "input_file", file_id: "file-1" },
      { type: "input_file", file_url: "https://example.com/a.pdf" },
    ])
      expect(
        responses([{ role: "user", content: [{ type: "input_text", text: "hi" }, part] }]) - text,
      ).toBeGreaterThanOrEqual(R);
    expect(responses([{ type: "item_reference", id: "msg_1" }])).toBeGreaterThanOrEqual(R);
    expect(
      responses([{ role: "user", content: [{ type: "input_image", file_id: "file-img" }] }]),
    ).toBeGreaterThanOrEqual(1600);
    expect(
      responses([
        {
          role: "user",
          content: [
            { type: "input_file", file_id: "a" },
            { type: "input_file", file_id: "b" },
          ],
        },
      ]),
    ).toBeGreaterThanOrEqual(2 * R);

    const anthropic = (content: unknown) =>
      ok(
        JSON.stringify({ model: "m", max_tokens: 10, messages: [{ role: "user", content }] }),
        MESSAGE,
        settings({ format: "anthropic" }),
      ).promptBound;
    expect(
      anthropic([{ type: "document", source: { type: "url", url: "https://x/a.pdf" } }]),
    ).toBeGreaterThanOrEqual(R);
    expect(anthropic([{ type: "document", source: { type: "file", file_id: "f" } }])).toBeGreaterThanOrEqual(
      R,
    );
    expect(anthropic([{ type: "image", source: { type: "file", file_id: "f" } }])).toBeGreaterThanOrEqual(
      1600,
    );
  });

  it("refuses extra_body, and a service_tier the API does not take", () => {
    expect(parse('{"model":"m","extra_body":{"max_tokens":100000}}')).toMatchObject({
      ok: false,
      detail: expect.stringContaining('"extra_body" is not a field of the API'),
    });
    for (const tier of ['"Priority"', '"xyz"', '["priority"]', "1"])
      expect(parse(`{"model":"m","service_tier":${tier}}`)).toMatchObject({
        ok: false,
        detail: expect.stringContaining('"service_tier" must be one of'),
      });
    expect(parse('{"model":"m","service_tier":"priority"}').ok).toBe(true);
    expect(parse('{"model":"m","service_tier":null}').ok).toBe(true);
    expect(
      parse(
        '{"model":"m","max_tokens":5,"service_tier":"standard_only"}',
        MESSAGE,
        settings({ format: "anthropic" }),
      ).ok,
    ).toBe(true);
    expect(
      parse(
        '{"model":"m","max_tokens":5,"service_tier":"priority"}',
        MESSAGE,
        settings({ format: "anthropic" }),
      ).ok,
    ).toBe(false);
  });

  it("counts each of vLLM's prompt_embeds as a prompt of its own", () => {
    const one = ok('{"model":"m","prompt":"a","max_tokens":10}', COMPLETION);
    const embeds = ok('{"model":"m","prompt_embeds":["AAAA","BBBB","CCCC"],"max_tokens":10}', COMPLETION);
    expect(embeds.choices).toBe(one.choices * 4);
  });

  it("legacy completions hold a client's max_completion_tokens to the reservation and forward max_tokens only", () => {
    const r = ok('{"model":"m","prompt":"a","max_completion_tokens":100000}', COMPLETION);
    expect(r.ceiling).toBe(100000);
    const forwarded = JSON.parse(forwardedBody(r, 50, settings()).toString());
    expect(forwarded.max_tokens).toBe(50);
    expect(forwarded.max_completion_tokens).toBeUndefined();
  });

  it("refuses a key given twice inside stream_options, which it rewrites", () => {
    expect(
      parse('{"stream":true,"stream_options":{"include_usage":false,"include_usage":true}}'),
    ).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/stream_options/),
    });
  });

  it("a model the path names is the request's, whatever the body says", () => {
    const r = parseAiRequest(Buffer.from('{"model":"cheap"}'), CHAT, settings(), "gpt-4o");
    expect(r.ok && r.request.model).toBe("gpt-4o");
  });
});

describe("reservationOf", () => {
  it("reserves the prompt's bound and the output per choice, at the dearest input price", () => {
    const r = ok('{"model":"m","n":2,"max_tokens":100,"messages":[]}');
    const price = {
      row: "m",
      input: 2_500_000,
      output: 10_000_000,
      cachedInput: 1_250_000,
      cacheWrite: 3_000_000,
      cacheWrite1h: 5_000_000,
      audioInput: undefined,
      audioOutput: 12_000_000,
    };
    // Input at the dearest of its rates (an hour's cache write), output at audio's.
    expect(reservationOf(r, settings({ clamp: true, minOutput: 16 }), price)).toEqual({
      output: 100,
      choices: 2,
      minOutput: 16,
      input: r.promptBound,
      inputPico: 5_000_000,
      outputPico: 12_000_000,
    });
    const free = ok("{}", op("anthropic", "count"));
    expect(reservationOf(free, settings(), price)).toMatchObject({ output: 0, input: 0 });
  });
});

describe("keys an upstream matches whatever their case (Go's encoding/json, ASP.NET)", () => {
  it("refuses another spelling of a field the gateway reads, or two keys that fold together", () => {
    const body = '{"model":"gpt-4o-mini","max_tokens":50,"MAX_TOKENS":100000,"Model":"gpt-4o","N":8,"n":1}';
    expect(parse(body)).toMatchObject({ ok: false, detail: expect.stringMatching(/"MAX_TOKENS"/) });
    expect(parse('{"MODEL":"gpt-4o","messages":[]}')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/gives "MODEL", which some upstreams read as "model"/),
    });
    expect(parse('{"model":"m","N":8}')).toMatchObject({ ok: false });
    // Go folds the Kelvin sign into k and the long s into s.
    expect(parse('{"model":"m","max_to\\u212aen\\u017f":100000}')).toMatchObject({ ok: false });
    expect(parse('{"model":"m","Metadata":{},"metadata":{}}')).toMatchObject({
      ok: false,
      detail: expect.stringMatching(/both "Metadata" and "metadata"/),
    });
    expect(parse('{"model":"m","max_tokens":5,"user":"u","metadata":{}}')).toMatchObject({ ok: true });
  });

  it("never lets a case variant of `model` through, beside the model it reads or alone (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }).filter((up) => up.some(Boolean)),
        (up) => {
          const variant = [..."model"].map((c, i) => (up[i] ? c.toUpperCase() : c)).join("");
          const body = JSON.stringify({ model: "cheap", [variant]: "dear" });
          expect(parse(body).ok).toBe(false);
          expect(parse(JSON.stringify({ [variant]: "dear" })).ok).toBe(false);
        },
      ),
    );
  });
});
