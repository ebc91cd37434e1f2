// The event-stream meter: framing by the HTML standard's rules, one fresh JSON document per
// event, later values replacing earlier ones, any chunking, and constant memory on huge streams.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DEFAULT_USAGE_FIELDS } from "../../src/usage/fields.js";
import { MAX_REPORTED_UNITS, usageMeter } from "../../src/usage/meter.js";
import {
  ANTHROPIC_STREAM,
  ANTHROPIC_STREAM_EVENTS,
  meter,
  OPENAI_STREAM,
  OPENAI_STREAM_EVENTS,
  RESPONSES_STREAM,
  SSE_TYPE,
  splitAt,
} from "./support/usage-fixtures.js";

const sse = (body: string | Uint8Array | readonly (string | Uint8Array)[]) => meter(SSE_TYPE, body);
const usage = (n: number | string) => `{"usage":{"total_tokens":${n}}}`;

describe("event stream framing", () => {
  it.each([
    ["LF", "\n"],
    ["CR LF", "\r\n"],
    ["CR", "\r"],
  ])("lines may end in %s", (_name, eol) => {
    for (const body of [OPENAI_STREAM, ANTHROPIC_STREAM, RESPONSES_STREAM]) {
      expect(sse(body.replaceAll("\n", eol))).toBe(sse(body));
    }
    expect(sse(OPENAI_STREAM.replaceAll("\n", eol))).toBe(21);
  });

  it("counts a CR LF split between two chunks as one line end", () => {
    // Were the LF read as a second line end, the blank line would end the event after its first line.
    expect(sse(['data: {"usage":\r', '\ndata: {"total_tokens":5}}\r\n\r\n'])).toBe(5);
    expect(sse(['data: {"usage":\r', "\n", 'data: {"total_tokens":5}}\r', "\n\r\n"])).toBe(5);
  });

  it("joins an event's data lines with LF, and starts every event with a fresh document", () => {
    expect(sse('data: {"usage":\ndata: {"total_tokens":\ndata: 5}}\n\n')).toBe(5);
    expect(sse('data: {"usage":{"total_tokens":5\n\ndata: }}\n\n')).toBeUndefined();
    // A string cannot run across data lines: the joining LF is no string character, but the
    // scanner skips strings leniently, so only the structure matters.
    expect(sse('data: {"usage":{"total_tokens":5\ndata: }}\n\n')).toBe(5);
    expect(sse('data: {"usage":{"total_tokens":1\ndata:2}}\n\n')).toBeUndefined(); // "1\n2", not 12
  });

  it("reads only data fields: comments, event, id, retry and unknown fields change nothing", () => {
    const body = [
      ": keep-alive",
      `: ${usage(1)}`,
      "event: usage",
      `id: ${usage(2)}`,
      "retry: 1000",
      `datum: ${usage(3)}`,
      `Data: ${usage(4)}`,
      `dat: ${usage(5)}`,
      `data-x: ${usage(6)}`,
      `x-data: ${usage(7)}`,
      `data: ${usage(8)}`,
      "",
      "",
    ].join("\n");
    expect(sse(body)).toBe(8);
  });

  it("takes spaces after the colon, and a data line with no colon as an empty one", () => {
    expect(sse(`data:${usage(1)}\n\n`)).toBe(1);
    expect(sse(`data:   ${usage(2)}\n\n`)).toBe(2);
    expect(sse(`data\ndata: ${usage(3)}\n\n`)).toBe(3); // data is "\n{...}"
    expect(sse(`data\r\ndata\rdata: ${usage(4)}\n\n`)).toBe(4);
  });

  it("skips a leading BOM, and only there", () => {
    expect(sse(`\ufeffdata: ${usage(5)}\n\n`)).toBe(5);
    expect(sse(["\xef", "\xbb", `\xbfdata: ${usage(5)}\n\n`].map((s) => Buffer.from(s, "latin1")))).toBe(5);
    expect(sse(`\ufeff\ufeffdata: ${usage(5)}\n\n`)).toBeUndefined();
    expect(sse(Buffer.from(`\xef\xbbdata: ${usage(5)}\n\ndata: ${usage(6)}\n\n`, "latin1"))).toBe(6);
    expect(sse(Buffer.from(`\xef\ndata: ${usage(6)}\n\n`, "latin1"))).toBe(6);
  });

  it("ignores [DONE] and any event that is not a JSON object", () => {
    expect(sse(`data: ${usage(5)}\n\ndata: [DONE]\n\ndata: 7\n\ndata: "usage"\n\ndata: \n\n`)).toBe(5);
  });

  it("replaces a path's value by a later event's, unless the later one is not a count", () => {
    expect(sse(`data: ${usage(10)}\n\ndata: ${usage(20)}\n\n`)).toBe(20);
    expect(sse(`data: ${usage(20)}\n\ndata: ${usage(10)}\n\n`)).toBe(10);
    expect(sse(`data: ${usage(10)}\n\ndata: ${usage(-5)}\n\ndata: ${usage(1.5)}\n\n`)).toBe(10);
    expect(sse(`data: ${usage(10)}\n\ndata: ${usage("NaN")}\n\ndata: {"usage":null}\n\n`)).toBe(10);
    expect(sse(`data: ${usage(1e12)}\n\n`)).toBe(MAX_REPORTED_UNITS);
  });

  it("counts what a truncated stream completed, and no number cut by its end", () => {
    expect(sse(`data: ${usage(10)}\n\ndata: {"usage":{"total_tokens":123`)).toBe(10);
    expect(sse(`data: {"usage":{"total_tokens":123`)).toBeUndefined();
    expect(sse(`data: {"usage":{"total_tokens":123}}`)).toBe(123); // its blank line never came
    expect(sse(`data: {"usage":{"total_tokens":123\n\n`)).toBeUndefined();
    const prompt = OPENAI_STREAM.indexOf('"prompt_tokens":9') + '"prompt_tokens":9'.length;
    expect(sse(OPENAI_STREAM.slice(0, prompt))).toBeUndefined();
    // Cut inside the total, after its parts: the parts' sum is what was reported.
    const total = OPENAI_STREAM.indexOf('"total_tokens":21') + '"total_tokens":2'.length;
    expect(sse(OPENAI_STREAM.slice(0, total))).toBe(9 + 12);
  });
});

describe("event stream properties", () => {
  it("reads every fixture the same in two chunks, whatever the cut (an escape's backslash last included)", () => {
    for (const body of [OPENAI_STREAM, ANTHROPIC_STREAM, RESPONSES_STREAM]) {
      const bytes = Buffer.from(body);
      const whole = sse(bytes);
      for (let cut = 0; cut <= bytes.length; cut++) expect(sse(splitAt(bytes, [cut]))).toBe(whole);
    }
  });

  const fixtures = [OPENAI_STREAM_EVENTS, ANTHROPIC_STREAM_EVENTS].flat();
  /** Streams built from real events, odd ones, and garbage, with any line ending. */
  const stream = fc
    .tuple(
      fc.array(
        fc.oneof(
          { weight: 4, arbitrary: fc.constantFrom(...fixtures) },
          fc.constantFrom(": ping\n", "\n", "\r", "\r\n", "data: [DONE]\n\n", "data", "data:", "event: x\n"),
          fc.integer({ min: -3, max: 2_000_000 }).map((n) => `data: ${usage(n)}\n\n`),
          fc.string({ maxLength: 20 }),
        ),
        { maxLength: 25 },
      ),
      fc.constantFrom("\n", "\r\n", "\r"),
    )
    .map(([parts, eol]) => Buffer.from(parts.join("").replaceAll("\n", eol)));

  it("any chunking of the same bytes gives the same units(), at the end and after every chunk", () => {
    fc.assert(
      fc.property(stream, fc.array(fc.nat(4000), { maxLength: 40 }), (bytes, cuts) => {
        const whole = sse(bytes);
        const m = usageMeter(SSE_TYPE, DEFAULT_USAGE_FIELDS)!;
        let read = 0;
        for (const part of splitAt(bytes, cuts)) {
          m.write(Buffer.from(part));
          read += part.length;
          expect(m.units()).toBe(sse(bytes.subarray(0, read)));
        }
        expect(m.units()).toBe(whole);
        // One byte at a time: the finest chunking there is.
        expect(
          sse([
            ...splitAt(
              bytes,
              Array.from({ length: bytes.length }, (_, i) => i),
            ),
          ]),
        ).toBe(whole);
      }),
      { numRuns: 300 },
    );
  });

  it("never throws on random bytes, whatever the chunks", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 500 }), fc.array(fc.nat(500)), (bytes, cuts) => {
        expect(sse(splitAt(bytes, cuts))).toBe(sse(bytes));
      }),
      { numRuns: 2000 },
    );
  });
});

describe("huge streams", () => {
  const MB = 2 ** 20;
  const CHUNK = 64 * 1024;

  /** The JavaScript heap and the memory outside it (Buffers, ArrayBuffers). */
  const used = () => {
    const { heapUsed, external } = process.memoryUsage();
    return heapUsed + external;
  };

  /** Feeds `chunks` chunks made by `chunkAt`, then `tail`; returns units() and the memory growth. */
  function feed(chunks: number, chunkAt: (i: number) => Buffer, tail: string) {
    const m = usageMeter(SSE_TYPE, DEFAULT_USAGE_FIELDS)!;
    const before = used();
    for (let i = 0; i < chunks; i++) m.write(chunkAt(i));
    const grown = used() - before;
    m.write(Buffer.from(tail));
    return { units: m.units(), grown };
  }

  it("reads 20 MB of events in 64 KB chunks in constant memory", () => {
    // Whole events per chunk, so that the stream is valid all along; the same buffer is sent
    // each time, so the test itself allocates nothing while the meter reads.
    const events = OPENAI_STREAM_EVENTS.slice(0, 4).join("");
    const chunk = Buffer.from(events.repeat(Math.floor(CHUNK / events.length)));
    const { units, grown } = feed(Math.ceil((20 * MB) / chunk.length), () => chunk, OPENAI_STREAM_EVENTS[4]!);
    expect(units).toBe(21);
    expect(grown).toBeLessThan(4 * MB);
  });

  it("reads one event of 20 MB without holding it", () => {
    const text = Buffer.from('lorem ipsum \\" {'.repeat(CHUNK / 16));
    const head = Buffer.from('data: {"usage":{"total_tokens":3},"content":"');
    const { units, grown } = feed(320, (i) => (i === 0 ? head : text), '","x":1}\n\n');
    expect(units).toBe(3);
    expect(grown).toBeLessThan(4 * MB);
  });
});
