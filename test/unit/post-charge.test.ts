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
    ["99999999", 1, 0], // more than 7 digits: not a cost
    ["9999999", 0, MAX_POST_CHARGE],
  ] as const)("%j with %d pre-charged → %d more", (header, pre, extra) => {
    expect(extraUnits(header as string | string[] | undefined, pre)).toBe(extra);
  });
});
