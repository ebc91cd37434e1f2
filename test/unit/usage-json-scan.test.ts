// The incremental JSON scanner: which numbers count, where it looks, and what hostile bodies do
// to it (nothing: no throw, no memory, no time beyond one pass).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseUsageFields, type UsageFields } from "../../src/usage/fields.js";
import { MAX_REPORTED_UNITS } from "../../src/usage/meter.js";
import {
  ANTHROPIC_JSON,
  JSON_TYPE,
  meter,
  OPENAI_JSON,
  OPENAI_JSON_USAGE_FIRST,
  splitAt,
} from "./support/usage-fixtures.js";

const MAX = MAX_REPORTED_UNITS;

function fields(...written: string[]): UsageFields {
  const parsed = parseUsageFields(written);
  if ("error" in parsed) throw new Error(parsed.error);
  return parsed.fields;
}

const TOTAL = fields("usage.total_tokens");
const total = (valueText: string) => meter(JSON_TYPE, `{"usage":{"total_tokens":${valueText}}}`, TOTAL);

describe("which numbers count", () => {
  it.each([
    ["0", 0],
    ["7", 7],
    ["42", 42],
    ["-0", 0], // -0 is 0
    ["1.0", 1], // whole by value: serializers that write floats write 1.0
    ["1.000", 1],
    ["1e3", 1000],
    ["1E+3", 1000],
    ["1.50e1", 15],
    ["15e-1", undefined],
    ["1500e-2", 15],
    ["0.05e2", 5],
    ["0e99", 0],
    ["0.0", 0],
    ["999999", 999_999],
    ["1000000", MAX],
    ["1000001", MAX], // a whole number above the cap is capped, not ignored
    ["1e12", MAX],
    ["1e400", MAX], // whole although it parses as Infinity
    ["123456789012345678901234567890", MAX],
    ["1.5", undefined],
    ["0.5", undefined],
    ["1e-3", undefined],
    ["1.0000000000000000001", undefined], // not whole although it parses as 1
    ["-5", undefined],
    ["-1e12", undefined],
    ["-0.5", undefined],
    ['"100"', undefined], // strings are not numbers
    ["null", undefined],
    ["true", undefined],
    ["[5]", undefined],
    ['{"n":5}', undefined],
    // Not JSON: the document stops there.
    ["NaN", undefined],
    ["Infinity", undefined],
    ["-Infinity", undefined],
    ["+5", undefined],
    ["05", undefined],
    ["5.", undefined],
    [".5", undefined],
    ["5e", undefined],
    ["5e+", undefined],
    ["0x10", undefined],
    ["1_000", undefined],
    ["5 5", undefined],
    ["--5", undefined],
  ])("%s → %s", (text, units) => {
    expect(total(text)).toBe(units);
  });

  it("decides wholeness from the digits, exactly (checked against BigInt arithmetic)", () => {
    const digits = (min: number) =>
      fc.string({ unit: fc.constantFrom(..."0123456789"), minLength: min, maxLength: 30 });
    fc.assert(
      fc.property(
        fc.boolean(),
        digits(1),
        fc.option(digits(1)),
        fc.option(fc.integer({ min: -40, max: 40 })),
        (negative, intRaw, frac, exp) => {
          const int = intRaw.replace(/^0+(?=.)/, ""); // JSON: no leading zeros
          const text = `${negative ? "-" : ""}${int}${frac === null ? "" : `.${frac}`}${exp === null ? "" : `e${exp}`}`;
          // value = D × 10^scale with D the digits as an integer
          const d = BigInt(int + (frac ?? ""));
          const scale = (exp ?? 0) - (frac?.length ?? 0);
          let expected: number | undefined;
          if (d === 0n) expected = 0;
          else if (negative) expected = undefined;
          else if (scale >= 0) {
            const v = d * 10n ** BigInt(scale);
            expected = v > BigInt(MAX) ? MAX : Number(v);
          } else {
            const p = 10n ** BigInt(-scale);
            expected = d % p !== 0n ? undefined : d / p > BigInt(MAX) ? MAX : Number(d / p);
          }
          expect(total(text)).toBe(expected);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("counts a number only once its object goes on or closes", () => {
    expect(meter(JSON_TYPE, '{"usage":{"total_tokens":12', TOTAL)).toBeUndefined();
    expect(meter(JSON_TYPE, '{"usage":{"total_tokens":12 \n', TOTAL)).toBeUndefined();
    expect(meter(JSON_TYPE, '{"usage":{"total_tokens":12,', TOTAL)).toBe(12);
    expect(meter(JSON_TYPE, '{"usage":{"total_tokens":12}', TOTAL)).toBe(12);
    expect(meter(JSON_TYPE, '{"usage":{"total_tokens":12 }', TOTAL)).toBe(12);
    expect(meter(JSON_TYPE, '{"usage":{"total_tokens":12]', TOTAL)).toBeUndefined();
    expect(meter(JSON_TYPE, '{"usage":{"total_tokens":12 x', TOTAL)).toBeUndefined();
    // A number cut by the end of one chunk is finished by the next.
    expect(meter(JSON_TYPE, ['{"usage":{"total_tokens":1', "2", "3}}"], TOTAL)).toBe(123);
  });
});

describe("where it looks", () => {
  const cases: [string, string, number | undefined][] = [
    ["pretty-printed", '{\n\t"usage" : {\r\n  "total_tokens" :  5\n }\n}\n', 5],
    [
      "the last of repeated names wins, as in JSON.parse",
      '{"usage":{"total_tokens":5},"usage":{"total_tokens":7}}',
      7,
    ],
    [
      "a later invalid value does not erase an earlier one",
      '{"usage":{"total_tokens":5,"total_tokens":-1}}',
      5,
    ],
    ["not inside arrays", '{"choices":[{"usage":{"total_tokens":9}}]}', undefined],
    ["not at another depth", '{"x":{"usage":{"total_tokens":9}}}', undefined],
    ["not at the top level of an array", '[{"usage":{"total_tokens":9}}]', undefined],
    ["not when the top level is a scalar", '"usage"', undefined],
    [
      "names are exact",
      '{"Usage":{"total_tokens":1},"usage ":{"total_tokens":2},"usag":{"total_tokens":3}}',
      undefined,
    ],
    ["a longer name that starts with a watched one", '{"usagex":{"total_tokens":1}}', undefined],
    [
      "a name longer than the longest watched one, starting with it",
      '{"usage":{"total_tokensX":1}}',
      undefined,
    ],
    ["escaped names are decoded", '{"\\u0075sage":{"total_\\u0074okens":4}}', 4],
    [
      "an escape that decodes to another character",
      '{"usage\\n":{"total_tokens":4},"usag\\u00e9":{"total_tokens":4}}',
      undefined,
    ],
    ["brackets and quotes inside strings", '{"a":"}]{[\\"","b":{"c":"\\\\"},"usage":{"total_tokens":3}}', 3],
    [
      "skipped values of every kind",
      '{"a":[1,{"b":[]}],"b":-1.5e3,"c":true,"d":null,"e":{},"f":"","usage":{"total_tokens":3}}',
      3,
    ],
    [
      "watched objects with other members",
      '{"usage":{"a":{"total_tokens":1},"b":[2],"total_tokens":3,"c":"4"}}',
      3,
    ],
    ["a watched name holding something else", '{"usage":[{"total_tokens":3}]}', undefined],
    ["the first document only", '{"usage":{"total_tokens":1}} {"usage":{"total_tokens":2}}', 1],
    ["nothing after a syntax error", '{"a":1 "usage":{"total_tokens":2}}', undefined],
    ["nothing after a trailing comma", '{"usage":{"total_tokens":2,}, "x":{}}', 2],
    ["an empty object", "{}", undefined],
  ];
  it.each(cases)("%s", (_name, body, units) => {
    expect(meter(JSON_TYPE, body, TOTAL)).toBe(units);
  });

  it("skips unwatched values leniently (only their brackets and strings are followed)", () => {
    expect(meter(JSON_TYPE, '{"a": 12abc, "usage":{"total_tokens":3}}', TOTAL)).toBe(3);
  });
});

describe("hostile bodies", () => {
  it("1e6 nested [ cost a counter: before, inside and after a watched object", () => {
    const deep = "[".repeat(1_000_000);
    const close = "]".repeat(1_000_000);
    expect(meter(JSON_TYPE, deep, TOTAL)).toBeUndefined();
    expect(meter(JSON_TYPE, `{"a":${deep}${close},"usage":{"total_tokens":8}}`, TOTAL)).toBe(8);
    expect(meter(JSON_TYPE, `{"usage":{"x":${deep}${close},"total_tokens":8}}`, TOTAL)).toBe(8);
    expect(meter(JSON_TYPE, `{"usage":{"total_tokens":8},"a":${deep}`, TOTAL)).toBe(8);
    const objects = '{"usage":'.repeat(100_000);
    expect(meter(JSON_TYPE, objects, fields("usage.usage.usage.total_tokens"))).toBeUndefined();
  });

  it("reads names of any length without keeping them", () => {
    const long = "u".repeat(5_000_000);
    expect(meter(JSON_TYPE, `{"${long}":1,"usage":{"total_tokens":2}}`, TOTAL)).toBe(2);
    expect(meter(JSON_TYPE, `{"usage${long}":{"total_tokens":1}}`, TOTAL)).toBeUndefined();
  });

  it("reads numbers of any length without keeping them", () => {
    expect(total("1".repeat(1_000_000))).toBe(MAX);
    expect(total(`1.${"0".repeat(1_000_000)}`)).toBe(1);
    expect(total(`1.${"0".repeat(1_000_000)}1`)).toBeUndefined();
    expect(total(`0.${"0".repeat(1_000_000)}`)).toBe(0);
    expect(total(`1${"0".repeat(1_000_000)}e-1000000`)).toBe(1);
    expect(total(`1e${"9".repeat(100_000)}`)).toBe(MAX);
    expect(total(`1e-${"9".repeat(100_000)}`)).toBeUndefined();
  });

  it("passes over invalid UTF-8 and control bytes in strings and names", () => {
    const body = Buffer.concat([
      Buffer.from('{"a\xff":"'),
      Buffer.from([0xff, 0xfe, 0x00, 0xc3, 0x28, 0x0a, 0x80]),
      Buffer.from('","usage":{"total_tokens":6}}'),
    ]);
    expect(meter(JSON_TYPE, body, TOTAL)).toBe(6);
  });

  it("reads every body the same in two chunks, whatever the cut (an escape's backslash last included)", () => {
    const escapes = '{"a":"x\\\\","b":"\\"}{\\u0022[","usage":{"c":"\\\\\\"","total_tokens":3}}';
    expect(JSON.parse(escapes).usage.total_tokens).toBe(3);
    for (const [body, units] of [
      [OPENAI_JSON, 29],
      [OPENAI_JSON_USAGE_FIRST, 29],
      [ANTHROPIC_JSON, 18],
      [escapes, 3],
    ] as const) {
      const bytes = Buffer.from(body);
      for (let cut = 0; cut <= bytes.length; cut++)
        expect(meter(JSON_TYPE, splitAt(bytes, [cut]))).toBe(units);
    }
  });

  it("never throws on random bytes, and any split of them reads the same", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.array(fc.nat(300)), (bytes, cuts) => {
        const whole = meter(JSON_TYPE, bytes, TOTAL);
        expect(meter(JSON_TYPE, splitAt(bytes, cuts), TOTAL)).toBe(whole);
      }),
      { numRuns: 2000 },
    );
  });
});

describe("against JSON.parse", () => {
  const FIELDS = fields("usage.total_tokens", "usage.a + usage.b", "x.y.z");
  const count = fc.oneof(
    fc.nat(MAX * 2),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.constantFrom(0, 1, 1e21, 5e-324, -0, MAX, MAX + 1),
    fc.constantFrom("7", null, true, [3], { total_tokens: 1 }),
  );
  const usage = fc.dictionary(fc.constantFrom("total_tokens", "a", "b", "c", "y"), count, { maxKeys: 4 });
  const member = fc.oneof(
    fc.tuple(fc.constant("usage"), usage),
    fc.tuple(
      fc.constant("x"),
      fc.dictionary(fc.constantFrom("y", "usage"), fc.oneof(usage, fc.record({ z: count }))),
    ),
    fc.tuple(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 4 })),
  );
  const doc = fc.array(member, { maxLength: 6 }).map((members) => {
    const obj: Record<string, unknown> = {};
    for (const [k, v] of members) obj[k] = v;
    return obj;
  });

  /** What a JSON.parse-based reader would charge: objects only, whole numbers >= 0, capped. */
  function reference(parsed: unknown): number | undefined {
    for (const sum of FIELDS) {
      let total = 0;
      let complete = true;
      for (const path of sum) {
        let at: unknown = parsed;
        for (const name of path) {
          at =
            typeof at === "object" && at !== null && !Array.isArray(at) && Object.hasOwn(at, name)
              ? (at as Record<string, unknown>)[name]
              : undefined;
        }
        if (typeof at !== "number" || !Number.isInteger(at) || at < 0) {
          complete = false;
          break;
        }
        total += Math.min(at, MAX);
      }
      if (complete) return Math.min(total, MAX);
    }
    return undefined;
  }

  it("charges what a JSON.parse of the whole body would, compact or pretty, in any chunks", () => {
    fc.assert(
      fc.property(
        doc,
        fc.constantFrom(undefined, 1, "\t", " \r\n"),
        fc.array(fc.nat(400)),
        (obj, indent, cuts) => {
          const text = JSON.stringify(obj, null, indent as string | number | undefined);
          const bytes = Buffer.from(text);
          expect(meter(JSON_TYPE, splitAt(bytes, cuts), FIELDS)).toBe(reference(JSON.parse(text)));
        },
      ),
      { numRuns: 1000 },
    );
  });
});
