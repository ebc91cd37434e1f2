// The store writes the gateway's deadlines in Redis's clock with an offset learnt from replies.
// Whatever the skew between the two clocks, the estimate never exceeds the true offset (a script
// refuses early, never late), and it follows a clock that moves back at the first reply.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CLOCK_HORIZON_MS, RedisClock } from "../../src/limits/stores/redis/clock.js";

/** A reply: written at `sent`, TIME read `exec` ms later, handled `back` ms after that. */
function reply(clock: RedisClock, offset: number, sent: number, exec: number, back: number): void {
  clock.sample(sent + exec + offset, sent, sent + exec + back);
}

describe("RedisClock", () => {
  it("knows nothing before the first reply", () => {
    expect(new RedisClock().toRedis(1000)).toBeUndefined();
  });

  it("never puts a deadline later than the true one, whatever the skew and latencies", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -86_400_000, max: 86_400_000 }),
        fc.array(
          fc.record({
            gap: fc.integer({ min: 0, max: 3000 }),
            exec: fc.double({ min: 0, max: 50, noNaN: true }),
            back: fc.double({ min: 0, max: 500, noNaN: true }),
          }),
          { minLength: 1, maxLength: 50 },
        ),
        (offset, replies) => {
          const clock = new RedisClock();
          let t = 1_000;
          for (const r of replies) {
            t += r.gap;
            reply(clock, offset, t, r.exec, r.back);
            t += r.exec + r.back;
            expect(clock.offset!).toBeLessThanOrEqual(offset + 1e-6);
            expect(clock.toRedis(t + 100)!).toBeLessThanOrEqual(t + 100 + offset + 1e-6);
          }
        },
      ),
    );
  });

  it("keeps the tightest recent bound: one reply that sat in a lagging event loop does not loosen it", () => {
    const clock = new RedisClock();
    reply(clock, 5000, 0, 0.2, 0.3);
    expect(clock.offset).toBeCloseTo(4999.7);
    reply(clock, 5000, 10, 0.2, 200); // handled 200 ms late
    expect(clock.offset).toBeCloseTo(4999.7);
  });

  it("follows a clock that moved back at the first reply that proves it", () => {
    const clock = new RedisClock();
    reply(clock, 5000, 0, 0.2, 0.3);
    // A failover to a master 40 ms behind: its first reply's upper bound is below the estimate.
    reply(clock, 4960, 20, 0.2, 0.3);
    expect(clock.offset!).toBeLessThanOrEqual(4960);
    expect(clock.offset).toBeCloseTo(4959.7);
  });

  it("follows a clock that moved forward, and forgets old bounds after the horizon", () => {
    const clock = new RedisClock();
    reply(clock, 5000, 0, 0.2, 0.3);
    reply(clock, 5030, 20, 0.2, 0.3);
    expect(clock.offset).toBeCloseTo(5029.7);
    // A slow drift back by less than a reply's width is only noticed once the old bound expires.
    const clock2 = new RedisClock();
    reply(clock2, 5000, 0, 0.2, 0.1);
    reply(clock2, 4999.9, 3 * CLOCK_HORIZON_MS, 0.2, 5);
    expect(clock2.offset).toBeCloseTo(4994.9);
  });
});
