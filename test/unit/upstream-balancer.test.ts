// The balancer's arithmetic: every run of `sum of weights` picks gives each target exactly its
// weight, interleaved; a target left out is skipped without coming back owed a burst.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SmoothWeightedRoundRobin } from "../../src/upstream/balancer.js";

const items = (...weights: number[]) =>
  weights.map((weight, i) => ({ name: String.fromCharCode(97 + i), weight }));

function picks(
  rr: SmoothWeightedRoundRobin<{ name: string; weight: number }>,
  n: number,
  eligible = () => true,
) {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(rr.next(eligible)?.name ?? "-");
  return out;
}

describe("SmoothWeightedRoundRobin", () => {
  it("interleaves 1:1:2 as a share per request, not in blocks", () => {
    const rr = new SmoothWeightedRoundRobin(items(1, 1, 2));
    expect(picks(rr, 8).join("")).toBe("cabccabc");
  });

  it("gives each item exactly its weight in every run of sum-of-weights picks", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 20 }), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 1, max: 3 }),
        (weights, runs) => {
          const list = items(...weights);
          const rr = new SmoothWeightedRoundRobin(list);
          const total = weights.reduce((a, b) => a + b, 0);
          for (let run = 0; run < runs; run++) {
            const counts = new Map<string, number>();
            for (const name of picks(rr, total)) counts.set(name, (counts.get(name) ?? 0) + 1);
            for (const item of list) expect(counts.get(item.name)).toBe(item.weight);
          }
        },
      ),
    );
  });

  it("skips what is not eligible, and an item that comes back gets its share, not a burst", () => {
    const list = items(1, 1, 1);
    const rr = new SmoothWeightedRoundRobin(list);
    const out = picks(rr, 30, ((item: { name: string }) => item.name !== "b") as () => boolean);
    expect(out.filter((n) => n === "b")).toEqual([]);
    expect(out.filter((n) => n === "a").length).toBe(15);
    const back = picks(rr, 6);
    expect(back.filter((n) => n === "b").length).toBe(2);
  });

  it("answers null when nothing is eligible", () => {
    const rr = new SmoothWeightedRoundRobin(items(1, 2));
    expect(rr.next(() => false)).toBeNull();
  });
});
