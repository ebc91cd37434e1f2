import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { extraUnits, MAX_POST_CHARGE } from "../../src/proxy/post-charge.js";

describe("Tollgate-Cost parsing", () => {
  it.each([
    [undefined, 1, 0],
    ["15", 1, 14],
    [" 15 ", 5, 10],
    ["1", 5, 0], // below the pre-charge: no refund
    [["20", "30"], 1, 19], // repeated: the first
    ["-3", 1, 0],
    ["1.5", 1, 0],
    ["ten", 1, 0],
    ["9999999", 0, MAX_POST_CHARGE],
    ["10000000", 0, MAX_POST_CHARGE], // 8 digits and more: capped like 7, not ignored
    ["99999999", 1, MAX_POST_CHARGE - 1],
    ["1".repeat(40), 0, MAX_POST_CHARGE], // far past Number.MAX_SAFE_INTEGER
    ["0000000000000042", 2, 40], // leading zeros are still a whole number
    ["+5", 1, 0],
    ["1 000", 1, 0],
    ['"7"', 1, 0],
    ["\u0661\u0662", 1, 0], // Arabic-Indic digits are not ASCII digits
    ["", 1, 0],
  ] as const)("%j with %d pre-charged → %d more", (header, pre, extra) => {
    expect(extraUnits(header as string | string[] | undefined, pre)).toBe(extra);
  });
});

describe("Tollgate-Cost parsing, fuzzed", () => {
  const cap = fc.integer({ min: 0, max: MAX_POST_CHARGE });
  /** Strings built from what a cost parser must get right, plus anything at all. */
  const header = fc.oneof(
    fc.string(),
    fc.string({ unit: "binary" }),
    fc.string({
      unit: fc.constantFrom(
        "0",
        "1",
        "9",
        " ",
        "\t",
        "+",
        "-",
        ".",
        "e",
        '"',
        "'",
        ",",
        "\u00a0",
        "\u0663",
        "\uff11",
      ),
    }),
    fc.bigInt({ min: -(10n ** 40n), max: 10n ** 40n }).map((n) => n.toString()),
    fc.stringMatching(/^\s*\d{1,60}\s*$/),
  );

  it("never throws and always returns a whole number of units within the cap", () => {
    fc.assert(
      fc.property(
        fc.oneof(header, fc.array(header, { maxLength: 3 }), fc.constant(undefined)),
        cap,
        (value, preCharged) => {
          const extra = extraUnits(value, preCharged);
          expect(Number.isInteger(extra)).toBe(true);
          expect(extra).toBeGreaterThanOrEqual(0);
          expect(extra).toBeLessThanOrEqual(MAX_POST_CHARGE - preCharged);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("a digit string of any length worth the cap or more gives the cap", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.bigInt({ min: BigInt(MAX_POST_CHARGE), max: 10n ** 300n }).map((n) => n.toString()),
          fc.stringMatching(/^[1-9]\d{6,2000}$/).filter((s) => BigInt(s) >= BigInt(MAX_POST_CHARGE)),
        ),
        fc.stringMatching(/^0{0,20}$/),
        fc.stringMatching(/^[ \t]{0,3}$/),
        cap,
        (digits, zeros, pad, preCharged) => {
          expect(extraUnits(`${pad}${zeros}${digits}${pad}`, preCharged)).toBe(MAX_POST_CHARGE - preCharged);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it("a digit string below the cap is that many units, less the pre-charge", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_POST_CHARGE - 1 }), cap, (n, preCharged) => {
        expect(extraUnits(String(n), preCharged)).toBe(Math.max(0, n - preCharged));
      }),
    );
  });
});
