// The top-level members of a client's JSON body (src/ai/json-members.ts): where each value sits,
// so that an AI route changes one member and sends every other byte as the client wrote it. A
// parser of client bytes: fast-check over arbitrary JSON objects written with any spacing holds
// it to JSON.parse, and over edits to a parse of the edited text.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { objectLayout, withMembers } from "../../src/ai/json-members.js";

/** JSON.stringify with the spacing fast-check picks, between any two tokens. */
const spaced = (value: unknown, space: string | number) => JSON.stringify(value, null, space);
const objects = fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 8 });
const spacing = fc.oneof(
  fc.constant(0),
  fc.integer({ min: 1, max: 4 }),
  fc.constantFrom("\t", " \n", "\r\n  "),
);

describe("objectLayout", () => {
  it("agrees with JSON.parse on every member's key and value (fuzz)", () => {
    fc.assert(
      fc.property(objects, spacing, (object, space) => {
        const text = spaced(object, space);
        const layout = objectLayout(text);
        const parsed = JSON.parse(text) as Record<string, unknown>;
        expect(layout.duplicate).toBeUndefined();
        expect(layout.members.map((m) => m.key)).toEqual(Object.keys(parsed));
        for (const m of layout.members) expect(JSON.parse(text.slice(m.start, m.end))).toEqual(parsed[m.key]);
        expect(text[layout.close]).toBe("}");
      }),
      { numRuns: 2000 },
    );
  });

  it("reads a key written with escapes as JSON.parse does, and reports it given twice", () => {
    const text = '{"model":"cheap" , "mod\\u0065l" : "expensive"}';
    const layout = objectLayout(text);
    expect(layout.members.map((m) => m.key)).toEqual(["model", "model"]);
    expect(layout.duplicate).toBe("model");
    expect(objectLayout('{"a":1,"b":{"a":2},"c":[{"a":3}]}').duplicate).toBeUndefined();
  });

  it("finds values with strings that hold brackets, quotes and escapes", () => {
    const text = '{ "m" : "a\\"}]{[,", "n":[{"x":"]"},"}"] ,"o":-1.5e+3,"p":null }';
    const layout = objectLayout(text);
    expect(layout.members.map((m) => text.slice(m.start, m.end))).toEqual([
      '"a\\"}]{[,"',
      '[{"x":"]"},"}"]',
      "-1.5e+3",
      "null",
    ]);
  });
});

describe("withMembers", () => {
  it("sets members and leaves every other byte as written (fuzz)", () => {
    // A value of undefined removes the member.
    const edits = fc.array(
      fc.record({
        key: fc.string({ maxLength: 12 }),
        value: fc.option(fc.jsonValue({ maxDepth: 2 }), { nil: undefined }),
      }),
      { maxLength: 4 },
    );
    fc.assert(
      fc.property(objects, spacing, edits, (object, space, changes) => {
        const text = spaced(object, space);
        // One edit per key: the last of each, as a caller gives them.
        const byKey = new Map(changes.map((c) => [c.key, c.value]));
        const list = [...byKey].map(([key, value]) => ({
          key,
          json: value === undefined ? undefined : JSON.stringify(value),
        }));
        const out = withMembers(text, objectLayout(text), list);
        const expected = { ...(JSON.parse(text) as Record<string, unknown>) };
        // defineProperty: a key "__proto__" is a member like any other to JSON.parse.
        for (const [key, value] of byKey)
          if (value === undefined) delete expected[key];
          else
            Object.defineProperty(expected, key, {
              value: JSON.parse(JSON.stringify(value)),
              enumerable: true,
              writable: true,
              configurable: true,
            });
        expect(JSON.parse(out)).toEqual(expected);
        if (list.length === 0) expect(out).toBe(text);
        // Members not edited keep their exact text.
        const after = objectLayout(out);
        for (const m of objectLayout(text).members) {
          if (byKey.has(m.key)) continue;
          const same = after.members.find((n) => n.key === m.key)!;
          expect(out.slice(same.start, same.end)).toBe(text.slice(m.start, m.end));
        }
      }),
      { numRuns: 2000 },
    );
  });

  it("keeps numbers a re-serialisation would change", () => {
    const text = '{"seed": 12345678901234567890, "temperature": 1.0, "max_tokens": 9000}';
    const out = withMembers(text, objectLayout(text), [{ key: "max_tokens", json: "100" }]);
    expect(out).toBe('{"seed": 12345678901234567890, "temperature": 1.0, "max_tokens": 100}');
    expect(withMembers("{}", objectLayout("{}"), [{ key: "a", json: "1" }])).toBe('{"a":1}');
  });
});

describe("withMembers, removing", () => {
  it("takes a member out with one comma beside it", () => {
    const text = '{"a":1, "b":2, "c":3}';
    const layout = objectLayout(text);
    expect(withMembers(text, layout, [{ key: "b", json: undefined }])).toBe('{"a":1, "c":3}');
    expect(withMembers(text, layout, [{ key: "c", json: undefined }])).toBe('{"a":1, "b":2}');
    expect(withMembers(text, layout, [{ key: "a", json: undefined }])).toBe('{"b":2, "c":3}');
    expect(
      withMembers(text, layout, [
        { key: "b", json: undefined },
        { key: "c", json: undefined },
        { key: "d", json: "4" },
      ]),
    ).toBe('{"a":1,"d":4}');
    expect(
      JSON.parse(
        withMembers(
          text,
          layout,
          ["a", "b", "c"].map((key) => ({ key, json: undefined })),
        ),
      ),
    ).toEqual({});
  });
});
