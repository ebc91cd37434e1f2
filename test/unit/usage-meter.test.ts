// The usage meter on the bodies real LLM APIs send, and what it makes of the content type, the
// alternatives and sums of usage_fields, and the cap.
import { describe, expect, it } from "vitest";
import { MAX_POST_CHARGE } from "../../src/proxy/post-charge.js";
import { DEFAULT_USAGE_FIELDS, parseUsageFields, type UsageFields } from "../../src/usage/fields.js";
import { bodyKind, MAX_REPORTED_UNITS, usageMeter } from "../../src/usage/meter.js";
import {
  ANTHROPIC_JSON,
  ANTHROPIC_STREAM,
  ANTHROPIC_STREAM_EVENTS,
  JSON_TYPE,
  meter,
  OPENAI_JSON,
  OPENAI_JSON_USAGE_FIRST,
  OPENAI_STREAM,
  OPENAI_STREAM_EVENTS,
  RESPONSES_STREAM,
  RESPONSES_STREAM_EVENTS,
  SSE_TYPE,
} from "./support/usage-fixtures.js";

function fields(...written: string[]): UsageFields {
  const parsed = parseUsageFields(written);
  if ("error" in parsed) throw new Error(parsed.error);
  return parsed.fields;
}

describe("usage meter on real API bodies", () => {
  it.each([
    ["OpenAI chat completion", JSON_TYPE, OPENAI_JSON, 29],
    ["OpenAI chat completion, usage first", "application/json; charset=utf-8", OPENAI_JSON_USAGE_FIRST, 29],
    ["OpenAI chat stream with include_usage", SSE_TYPE, OPENAI_STREAM, 21],
    ["Anthropic message", JSON_TYPE, ANTHROPIC_JSON, 18],
    ["Anthropic stream (message_start + cumulative message_delta)", SSE_TYPE, ANTHROPIC_STREAM, 40],
    ["Responses API stream (response.completed)", "text/event-stream; charset=utf-8", RESPONSES_STREAM, 48],
  ])("%s → %d tokens", (_name, type, body, tokens) => {
    expect(meter(type, body)).toBe(tokens);
  });

  it("reports usage as soon as the event that carries it is complete, before [DONE]", () => {
    const m = usageMeter(SSE_TYPE, DEFAULT_USAGE_FIELDS)!;
    for (const event of OPENAI_STREAM_EVENTS.slice(0, 4)) m.write(Buffer.from(event));
    expect(m.units()).toBeUndefined(); // "usage": null so far
    m.write(Buffer.from(OPENAI_STREAM_EVENTS[4]!));
    expect(m.units()).toBe(21);
  });

  it("charges an Anthropic stream the last cumulative output count, not their sum", () => {
    const m = usageMeter(SSE_TYPE, DEFAULT_USAGE_FIELDS)!;
    m.write(Buffer.from(ANTHROPIC_STREAM_EVENTS[0]!));
    // Only message_start so far: no alternative is complete, the route's cost applies.
    expect(m.units()).toBeUndefined();
    for (const event of ANTHROPIC_STREAM_EVENTS.slice(1, 6)) m.write(Buffer.from(event));
    expect(m.units()).toBe(25 + 10);
    for (const event of ANTHROPIC_STREAM_EVENTS.slice(6)) m.write(Buffer.from(event));
    expect(m.units()).toBe(25 + 15);
  });

  it("prefers a message_delta that carries the cumulative input count too", () => {
    const body =
      ANTHROPIC_STREAM_EVENTS[0]! +
      'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":30,"output_tokens":15}}\n\n';
    expect(meter(SSE_TYPE, body)).toBe(45);
  });

  it("reads the Responses API usage only from the event that has it (response.created has usage: null)", () => {
    expect(meter(SSE_TYPE, RESPONSES_STREAM_EVENTS.slice(0, 2))).toBeUndefined();
  });
});

describe("content types", () => {
  it.each([
    ["application/json", "json"],
    ["application/json; charset=utf-8", "json"],
    ["Application/JSON;charset=UTF-8", "json"],
    ["  application/json  ", "json"],
    ["application/problem+json", "json"],
    ["application/vnd.api+json; ext=bulk", "json"],
    ["text/event-stream", "event-stream"],
    ["text/event-stream; charset=utf-8", "event-stream"],
    ["TEXT/Event-Stream", "event-stream"],
    [undefined, null],
    ["", null],
    ["text/plain", null],
    ["application/jsonx", null],
    ["application/x-ndjson", null],
    ["application/+json", null],
    ["+json", null],
    ["json", null],
    ["text/event-stream-x", null],
    ["application/octet-stream", null],
  ])("%j → %s", (type, kind) => {
    expect(bodyKind(type)).toBe(kind);
    expect(usageMeter(type, DEFAULT_USAGE_FIELDS) === null).toBe(kind === null);
  });

  it("reads an event stream sent as JSON as nothing, and JSON sent as an event stream as nothing", () => {
    expect(meter(JSON_TYPE, OPENAI_STREAM)).toBeUndefined();
    expect(meter(SSE_TYPE, OPENAI_JSON)).toBeUndefined();
  });
});

describe("alternatives and sums", () => {
  it("takes the first alternative whose every path was reported", () => {
    const both = '{"usage":{"total_tokens":30,"prompt_tokens":1,"completion_tokens":2}}';
    expect(meter(JSON_TYPE, both)).toBe(30);
    expect(meter(JSON_TYPE, '{"usage":{"prompt_tokens":1,"completion_tokens":2}}')).toBe(3);
    // One part missing: that alternative does not count, not even as a partial sum.
    expect(meter(JSON_TYPE, '{"usage":{"prompt_tokens":1}}')).toBeUndefined();
  });

  it("passes over an alternative whose value is not a count", () => {
    expect(meter(JSON_TYPE, '{"usage":{"total_tokens":-5,"prompt_tokens":1,"completion_tokens":2}}')).toBe(3);
    expect(meter(JSON_TYPE, '{"usage":{"total_tokens":"30","input_tokens":4,"output_tokens":5}}')).toBe(9);
  });

  it("reads custom fields and sums of any number of paths", () => {
    const custom = fields("meta.billed_units.tokens", "meta.a + meta.b + extra");
    expect(meter(JSON_TYPE, '{"meta":{"billed_units":{"tokens":7}}}', custom)).toBe(7);
    expect(meter(JSON_TYPE, '{"meta":{"a":1,"b":2},"extra":3}', custom)).toBe(6);
    expect(meter(JSON_TYPE, '{"meta":{"a":1,"b":2}}', custom)).toBeUndefined();
    // A path that is both a leaf and leads on reads whichever the body has.
    const both = fields("usage.tokens", "usage");
    expect(meter(JSON_TYPE, '{"usage":{"tokens":4}}', both)).toBe(4);
    expect(meter(JSON_TYPE, '{"usage":9}', both)).toBe(9);
  });

  it("caps a sum at MAX_REPORTED_UNITS, the post-charge cap", () => {
    expect(MAX_REPORTED_UNITS).toBe(MAX_POST_CHARGE);
    expect(meter(JSON_TYPE, '{"usage":{"prompt_tokens":900000,"completion_tokens":900000}}')).toBe(
      MAX_REPORTED_UNITS,
    );
    expect(meter(JSON_TYPE, '{"usage":{"prompt_tokens":999999,"completion_tokens":1}}')).toBe(1_000_000);
  });

  it("gives every meter its own values, with the compiled fields shared", () => {
    const a = usageMeter(JSON_TYPE, DEFAULT_USAGE_FIELDS)!;
    const b = usageMeter(JSON_TYPE, DEFAULT_USAGE_FIELDS)!;
    a.write(Buffer.from('{"usage":{"total_tokens":5}}'));
    expect(a.units()).toBe(5);
    expect(b.units()).toBeUndefined();
  });

  it("reports nothing with no fields at all", () => {
    expect(meter(JSON_TYPE, OPENAI_JSON, [])).toBeUndefined();
    expect(meter(SSE_TYPE, OPENAI_STREAM, [])).toBeUndefined();
  });
});
