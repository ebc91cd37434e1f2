// A request keeps the id its client sent when it is a plain token; anything else (a list, a
// value that could break a log line or a header, one too long) is replaced by a fresh UUID.
import { describe, expect, it } from "vitest";
import { requestIdOf } from "../../src/http/request-id.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("requestIdOf", () => {
  it.each(["abc-123", "trace:span.1_x", "a".repeat(128)])("keeps %s", (id) => {
    expect(requestIdOf({ "x-request-id": id })).toBe(id);
  });

  it.each([
    ["none", undefined],
    ["an empty one", ""],
    ["one too long", "a".repeat(129)],
    ["a space", "a b"],
    ["a quote", 'a"b'],
    ["a non-ASCII letter", "café"],
  ])("replaces %s with a UUID", (_what, id) => {
    expect(requestIdOf(id === undefined ? {} : { "x-request-id": id })).toMatch(UUID);
  });

  it("replaces a header sent twice", () => {
    expect(requestIdOf({ "x-request-id": ["a", "b"] as unknown as string })).toMatch(UUID);
  });

  it("gives every request without one an id of its own", () => {
    expect(requestIdOf({})).not.toBe(requestIdOf({}));
  });
});
