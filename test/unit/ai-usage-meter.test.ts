// What an AI answer reports it used (src/usage/ai-usage.ts), in each format's fields, from a
// JSON body or a stream's events, however the bytes are split into chunks.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { AiFormat } from "../../src/ai/settings.js";
import { aiUsageMeter, MAX_AI_REPORTED } from "../../src/usage/ai-usage.js";

function read(format: AiFormat, type: string, body: string, cuts: number[] = []) {
  const meter = aiUsageMeter(format, type)!;
  const bytes = Buffer.from(body);
  let at = 0;
  for (const cut of [...cuts.map((c) => c % (bytes.length + 1)).sort((a, b) => a - b), bytes.length]) {
    meter.write(bytes.subarray(at, Math.max(at, cut)));
    at = Math.max(at, cut);
  }
  return meter.usage();
}

const sse = (...events: unknown[]) => events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join("");

const CASES: {
  name: string;
  format: AiFormat;
  type: string;
  body: string;
  usage: ReturnType<typeof read>;
}[] = [
  {
    name: "openai chat JSON, cached tokens",
    format: "openai",
    type: "application/json",
    body: JSON.stringify({
      choices: [{ message: { content: "x" } }],
      usage: {
        prompt_tokens: 1200,
        completion_tokens: 300,
        total_tokens: 1500,
        prompt_tokens_details: { cached_tokens: 1000 },
      },
    }),
    usage: { input: 200, cachedInput: 1000, cacheWrite: 0, output: 300, audioInput: 0, audioOutput: 0 },
  },
  {
    name: "openai stream, usage in the last chunk",
    format: "openai",
    type: "text/event-stream",
    body: `${sse({ choices: [{ delta: { content: "a" } }] }, { choices: [], usage: { prompt_tokens: 9, completion_tokens: 7, total_tokens: 16 } })}data: [DONE]\n\n`,
    usage: { input: 9, cachedInput: 0, cacheWrite: 0, output: 7, audioInput: 0, audioOutput: 0 },
  },
  {
    name: "openai embeddings: prompt tokens only",
    format: "openai",
    type: "application/json",
    body: JSON.stringify({ data: [], usage: { prompt_tokens: 42, total_tokens: 42 } }),
    usage: { input: 42, cachedInput: 0, cacheWrite: 0, output: 0, audioInput: 0, audioOutput: 0 },
  },
  {
    name: "openai audio tokens, in and out",
    format: "openai",
    type: "application/json",
    body: JSON.stringify({
      usage: {
        prompt_tokens: 100,
        completion_tokens: 50,
        prompt_tokens_details: { audio_tokens: 60 },
        completion_tokens_details: { audio_tokens: 40 },
      },
    }),
    usage: { input: 100, cachedInput: 0, cacheWrite: 0, output: 50, audioInput: 60, audioOutput: 40 },
  },
  {
    name: "anthropic cache writes of an hour",
    format: "anthropic",
    type: "application/json",
    body: JSON.stringify({
      usage: {
        input_tokens: 1,
        output_tokens: 2,
        cache_creation_input_tokens: 300,
        cache_creation: { ephemeral_5m_input_tokens: 100, ephemeral_1h_input_tokens: 200 },
      },
    }),
    usage: { input: 1, cachedInput: 0, cacheWrite: 300, output: 2, cacheWrite1h: 200 },
  },
  {
    name: "responses JSON",
    format: "responses",
    type: "application/json",
    body: JSON.stringify({
      usage: { input_tokens: 50, input_tokens_details: { cached_tokens: 10 }, output_tokens: 5 },
    }),
    usage: { input: 40, cachedInput: 10, cacheWrite: 0, output: 5 },
  },
  {
    name: "responses stream: response.completed",
    format: "responses",
    type: "text/event-stream",
    body: sse(
      { type: "response.created", response: { usage: null } },
      { type: "response.output_text.delta", delta: "x" },
      { type: "response.completed", response: { usage: { input_tokens: 11, output_tokens: 22 } } },
    ),
    usage: { input: 11, cachedInput: 0, cacheWrite: 0, output: 22 },
  },
  {
    name: "anthropic JSON with cache fields",
    format: "anthropic",
    type: "application/json",
    body: JSON.stringify({
      usage: {
        input_tokens: 30,
        cache_creation_input_tokens: 100,
        cache_read_input_tokens: 400,
        output_tokens: 60,
      },
    }),
    usage: { input: 30, cachedInput: 400, cacheWrite: 100, output: 60, cacheWrite1h: 0 },
  },
  {
    name: "anthropic stream: input at the start, cumulative output in the last delta",
    format: "anthropic",
    type: "text/event-stream",
    body: sse(
      {
        type: "message_start",
        message: { usage: { input_tokens: 25, cache_read_input_tokens: 5, output_tokens: 1 } },
      },
      { type: "content_block_delta", delta: { text: "x" } },
      { type: "message_delta", usage: { output_tokens: 10 } },
      { type: "message_delta", usage: { output_tokens: 80 } },
      { type: "message_stop" },
    ),
    usage: { input: 25, cachedInput: 5, cacheWrite: 0, output: 80, cacheWrite1h: 0 },
  },
];

describe("aiUsageMeter", () => {
  for (const c of CASES) {
    it(`${c.name}, however the body is split`, () => {
      expect(read(c.format, c.type, c.body)).toEqual(c.usage);
      fc.assert(
        fc.property(fc.array(fc.nat(), { maxLength: 6 }), (cuts) => {
          expect(read(c.format, c.type, c.body, cuts)).toEqual(c.usage);
        }),
        { numRuns: 200 },
      );
    });
  }

  it("reports nothing for an answer without usage, and caps a huge value", () => {
    expect(read("openai", "application/json", '{"choices":[]}')).toBeUndefined();
    expect(
      read("anthropic", "text/event-stream", sse({ type: "message_start", message: {} })),
    ).toBeUndefined();
    expect(aiUsageMeter("openai", "text/plain")).toBeNull();
    expect(
      read("openai", "application/json", '{"usage":{"prompt_tokens":1e12,"completion_tokens":1}}'),
    ).toMatchObject({
      input: MAX_AI_REPORTED,
    });
    // A count that is not one is no report.
    expect(
      read("openai", "application/json", '{"usage":{"prompt_tokens":-5,"completion_tokens":1}}'),
    ).toBeUndefined();
  });
});
