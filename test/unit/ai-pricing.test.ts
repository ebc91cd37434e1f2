// What an AI request reserves and costs (src/limits/budget-reservation.ts, src/ai/prices.ts):
// integer arithmetic in pico-dollars, exact to the micro-dollar; the clamp's fit never above
// what a budget holds and never one token short of it; the price table's rows and patterns; and
// which operations an AI route meters (src/ai/operations.ts).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { classify } from "../../src/ai/operations.js";
import { PriceTable, parsePrice, totalTokens, usageMicroDollars } from "../../src/ai/prices.js";
import {
  type BudgetReservation,
  fitOutput,
  microDollars,
  reservedUnits,
} from "../../src/limits/budget-reservation.js";
import { formatUsd } from "../../src/limits/units.js";

const reservation = (over: Partial<BudgetReservation> = {}): BudgetReservation => ({
  output: 1000,
  choices: 1,
  minOutput: 16,
  input: 200,
  inputPico: 2_500_000,
  outputPico: 10_000_000,
  ...over,
});

describe("reservedUnits and microDollars", () => {
  it("takes input + output × choices tokens, and their cost rounded up once", () => {
    const r = reservation({ choices: 3 });
    expect(reservedUnits(r, "tokens")).toBe(3200);
    // 200 × 2.5 µ$ + 3000 × 10 µ$ = 30,500 µ$.
    expect(reservedUnits(r, "usd")).toBe(30_500);
    // $0.15 per million: 3 tokens are 0.45 µ$, charged as 1 (never 0.15 × 3 = 0.44999… rounded).
    expect(microDollars([[3, 150_000]])).toBe(1);
    expect(microDollars([[1_000_000, 150_000]])).toBe(150_000);
    // Beyond 2^53 pico-dollars, still exact.
    expect(microDollars([[100_000_000, 1_000_000_000_000]])).toBe(100_000_000_000_000);
  });
});

describe("fitOutput", () => {
  it("is the most output every budget can hold: one more would not fit (property)", () => {
    fc.assert(
      fc.property(
        fc.record({
          output: fc.integer({ min: 1, max: 100_000 }),
          choices: fc.integer({ min: 1, max: 8 }),
          minOutput: fc.integer({ min: 1, max: 200 }),
          input: fc.integer({ min: 0, max: 100_000 }),
          inputPico: fc.integer({ min: 0, max: 100_000_000 }),
          outputPico: fc.integer({ min: 0, max: 100_000_000 }),
        }),
        fc.array(
          fc.record({
            unit: fc.constantFrom("tokens" as const, "usd" as const),
            remaining: fc.integer({ min: 0, max: 5_000_000 }),
          }),
          { minLength: 1, maxLength: 3 },
        ),
        (r, budgets) => {
          const fit = fitOutput(r, budgets);
          if (fit === undefined) {
            // Not even min_output (or the request's own output, when smaller) fits some budget.
            const least = Math.min(r.minOutput, r.output);
            expect(budgets.some((b) => reservedUnits(r, b.unit, least) > b.remaining)).toBe(true);
            return;
          }
          expect(fit).toBeLessThanOrEqual(r.output);
          expect(fit).toBeGreaterThanOrEqual(Math.min(r.minOutput, r.output));
          for (const b of budgets) expect(reservedUnits(r, b.unit, fit)).toBeLessThanOrEqual(b.remaining);
          if (fit < r.output)
            expect(budgets.some((b) => reservedUnits(r, b.unit, fit + 1) > b.remaining)).toBe(true);
        },
      ),
      { numRuns: 5000 },
    );
  });

  it("never lowers a request that may not be clamped", () => {
    expect(
      fitOutput(reservation({ minOutput: undefined }), [{ unit: "tokens", remaining: 10 }]),
    ).toBeUndefined();
  });
});

describe("the price table", () => {
  const table = new PriceTable({
    "gpt-4o": { input: 2.5, output: 10, cached_input: 1.25 },
    "gpt-4o*": { input: 5, output: 15 },
    "gpt-4o-mini*": { input: 0.15, output: 0.6 },
    "*": { input: 99, output: 99 },
    default: { input: 1, output: 2 },
  });

  it("prices by the exact row, then the most specific pattern, then default", () => {
    expect(table.priceOf("gpt-4o")!.row).toBe("gpt-4o");
    expect(table.priceOf("gpt-4o-2024-08-06")!.row).toBe("gpt-4o*");
    expect(table.priceOf("gpt-4o-mini-2024-07-18")!.row).toBe("gpt-4o-mini*");
    expect(table.priceOf("llama-3")!.row).toBe("*");
    expect(new PriceTable({ default: { input: 1, output: 2 } }).priceOf(undefined)!.row).toBe("default");
    expect(new PriceTable({ a: { input: 1, output: 2 } }).priceOf("b")).toBeUndefined();
    // A pattern matches the whole name, its other characters literally.
    expect(new PriceTable({ "a.b*": { input: 1, output: 1 } }).priceOf("aXb")).toBeUndefined();
  });

  it("charges each kind of token at its price, rounded up once", () => {
    const price = table.priceOf("gpt-4o")!;
    const usage = { input: 800, cachedInput: 200, cacheWrite: 0, output: 500 };
    expect(totalTokens(usage)).toBe(1500);
    // 800 × 2.5 + 200 × 1.25 + 500 × 10 = 7,250 µ$.
    expect(usageMicroDollars(usage, price)).toBe(7250);
    expect(formatUsd(7250)).toBe("$0.00725");
    expect(formatUsd(1_500_000)).toBe("$1.50");
    expect(formatUsd(200_000_000)).toBe("$200.00");
  });

  it("prices audio, hour-long cache writes and service tiers apart; a dearer tier without a row is none", () => {
    const t = new PriceTable({
      "gpt-4o-audio": { input: 2.5, output: 10, audio_input: 40, audio_output: 80 },
      "gpt-4o@priority": { input: 4.25, output: 17 },
      "gpt-4o": { input: 2.5, output: 10 },
      claude: { input: 3, output: 15 },
    });
    // 60 of 100 input tokens and 40 of 50 output are audio.
    expect(
      usageMicroDollars(
        { input: 100, cachedInput: 0, cacheWrite: 0, output: 50, audioInput: 60, audioOutput: 40 },
        t.priceOf("gpt-4o-audio")!,
      ),
    ).toBe(Math.ceil((40 * 2.5 + 60 * 40 + 10 * 10 + 40 * 80) * 1));
    // Anthropic's defaults: 1.25 × input for five minutes, 2 × for an hour.
    const claude = t.priceOf("claude")!;
    expect(
      usageMicroDollars({ input: 0, cachedInput: 0, cacheWrite: 300, cacheWrite1h: 200, output: 0 }, claude),
    ).toBe(100 * 3.75 + 200 * 6);
    expect(t.priceOf("gpt-4o", "priority")!.row).toBe("gpt-4o@priority");
    expect(t.priceOf("gpt-4o", "scale")).toBeUndefined();
    expect(t.priceOf("gpt-4o", "flex")!.row).toBe("gpt-4o");
    expect(t.priceOf("gpt-4o", "auto")!.row).toBe("gpt-4o");
  });

  it("a pattern row prices the standard tier only: a dearer tier needs a row that names it", () => {
    const t = new PriceTable({
      "gpt-4o-mini*": { input: 0.15, output: 0.6 },
      "claude-3-5-sonnet*": { input: 3, output: 15 },
      "o3*@priority": { input: 3.5, output: 14 },
      o3: { input: 2, output: 8 },
    });
    expect(t.priceOf("gpt-4o-mini-2024-07-18")!.row).toBe("gpt-4o-mini*");
    expect(t.priceOf("gpt-4o-mini-2024-07-18", "priority")).toBeUndefined();
    expect(t.priceOf("gpt-4o-mini", "scale")).toBeUndefined();
    expect(t.priceOf("gpt-4o-mini", "flex")!.row).toBe("gpt-4o-mini*");
    // `*` still matches an `@` in a model id (Vertex's versions).
    expect(t.priceOf("claude-3-5-sonnet@20240620")!.row).toBe("claude-3-5-sonnet*");
    expect(t.priceOf("o3", "priority")!.row).toBe("o3*@priority");
    expect(t.priceOf("o3-2025-04-16", "priority")!.row).toBe("o3*@priority");
  });

  it("refuses a price finer than a micro-dollar table holds", () => {
    expect(parsePrice(2.5)).toBe(2_500_000);
    expect(parsePrice(0.075)).toBe(75_000);
    expect(parsePrice(0.0000001)).toMatch(/more than six decimals/);
    expect(parsePrice(-1)).toMatch(/0 or more/);
  });
});

describe("what an AI route meters", () => {
  it("knows each format's operations by the end of the path, whatever comes before", () => {
    const name = (c: ReturnType<typeof classify>) => (c.kind === "operation" ? c.operation.name : c.kind);
    expect(name(classify("openai", "POST", "/v1/chat/completions"))).toBe("chat");
    expect(name(classify("openai", "POST", "/chat/completions/"))).toBe("chat");
    expect(name(classify("openai", "POST", "/openai/deployments/d1/chat/completions"))).toBe("chat");
    expect(name(classify("openai", "POST", "/v1/Chat/Completions"))).toBe("chat");
    expect(name(classify("openai", "POST", "/engines/davinci/completions"))).toBe("completion");
    expect(name(classify("openai", "POST", "/v1/embeddings"))).toBe("embedding");
    expect(name(classify("responses", "POST", "/v1/responses"))).toBe("response");
    expect(name(classify("anthropic", "POST", "/v1/messages"))).toBe("message");
    expect(name(classify("anthropic", "POST", "/v1/messages/count_tokens"))).toBe("count");
    expect(name(classify("openai", "GET", "/v1/models"))).toBe("passthrough");
    expect(classify("openai", "PUT", "/v1/chat/completions")).toMatchObject({ kind: "refused", status: 405 });
    expect(classify("openai", "POST", "/v1/images/generations")).toMatchObject({
      kind: "refused",
      status: 404,
    });
    expect(classify("openai", "POST", "/api/chat")).toMatchObject({ kind: "refused", status: 404 });
    expect(classify("anthropic", "POST", "/v1/chat/completions")).toMatchObject({ kind: "refused" });
  });
});
