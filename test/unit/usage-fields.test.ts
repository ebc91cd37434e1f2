// The route key `usage_fields` as written, and the defaults it replaces.
import { describe, expect, it } from "vitest";
import { DEFAULT_USAGE_FIELDS, formatUsageSum, parseUsageFields } from "../../src/usage/fields.js";

describe("parseUsageFields", () => {
  it("reads the defaults as an operator would write them, in the documented order", () => {
    const written = [
      "usage.total_tokens",
      "usage.prompt_tokens + usage.completion_tokens",
      "usage.input_tokens + usage.output_tokens",
      "message.usage.input_tokens + usage.output_tokens",
      "response.usage.total_tokens",
    ];
    expect(parseUsageFields(written)).toEqual({ fields: DEFAULT_USAGE_FIELDS });
    expect(DEFAULT_USAGE_FIELDS.map(formatUsageSum)).toEqual(written);
  });

  it("takes one entry written without a list, spaces around + or none, - and digits in names", () => {
    expect(parseUsageFields("usage.total_tokens")).toEqual({ fields: [[["usage", "total_tokens"]]] });
    expect(parseUsageFields(["  meta.in-tokens+meta.out_2 "])).toEqual({
      fields: [
        [
          ["meta", "in-tokens"],
          ["meta", "out_2"],
        ],
      ],
    });
    expect(parseUsageFields(["tokens"])).toEqual({ fields: [[["tokens"]]] });
  });

  it("returns frozen fields (a compiled route is shared by every request)", () => {
    const parsed = parseUsageFields(["a.b + c"]);
    if (!("fields" in parsed)) throw new Error("expected fields");
    expect(Object.isFrozen(parsed.fields)).toBe(true);
    expect(Object.isFrozen(parsed.fields[0])).toBe(true);
    expect(Object.isFrozen(parsed.fields[0]![0])).toBe(true);
    expect(Object.isFrozen(DEFAULT_USAGE_FIELDS[3]![0])).toBe(true);
  });

  it.each([
    [[], 0, "usage_fields is empty: name at least one token field, e.g. usage.total_tokens"],
    [
      ["usage.total_tokens", ""],
      1,
      'usage_fields entry "": is empty: write a dotted path like usage.total_tokens, or paths joined by +',
    ],
    [
      ["  "],
      0,
      'usage_fields entry "  ": is empty: write a dotted path like usage.total_tokens, or paths joined by +',
    ],
    [
      ["usage.a +"],
      0,
      'usage_fields entry "usage.a +": has a + with no path on one side: write usage.a + usage.b',
    ],
    [
      ["a", "b", "+ b"],
      2,
      'usage_fields entry "+ b": has a + with no path on one side: write usage.a + usage.b',
    ],
    [
      ["usage..total"],
      0,
      'usage_fields entry "usage..total": path "usage..total" has an empty name between dots',
    ],
    [[".usage"], 0, 'usage_fields entry ".usage": path ".usage" has an empty name between dots'],
    [
      ["usage.total tokens"],
      0,
      'usage_fields entry "usage.total tokens": "total tokens" in "usage.total tokens" is not a field name: names are letters, digits, _ and -, joined by dots',
    ],
    [
      ["x", "choices[0].usage"],
      1,
      'usage_fields entry "choices[0].usage": "choices[0]" in "choices[0].usage" is not a field name: names are letters, digits, _ and -, joined by dots',
    ],
    [
      ["usage.tökens"],
      0,
      'usage_fields entry "usage.tökens": "tökens" in "usage.tökens" is not a field name: names are letters, digits, _ and -, joined by dots',
    ],
    [
      ["choices.0.usage.total_tokens"],
      0,
      'usage_fields entry "choices.0.usage.total_tokens": "0" in "choices.0.usage.total_tokens" reads like an array index, and arrays are not followed: usage is read from objects (usage.total_tokens, message.usage.input_tokens)',
    ],
    [
      ["usage.a + usage.a"],
      0,
      'usage_fields entry "usage.a + usage.a": names usage.a twice, which would count it twice',
    ],
  ])("%j → error at %d", (written, at, error) => {
    expect(parseUsageFields(written)).toEqual({ error, at });
  });
});
