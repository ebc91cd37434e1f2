// The price table of money budgets (`models:`): dollars per million tokens per model, compiled to
// whole pico-dollars per token (a price of $2.50 per million is 2,500,000 pico-dollars, 2.5 µ$,
// per token) so that a request's cost is integer arithmetic and exact to the micro-dollar.
//
// A request is priced by the model it is served by (its body's, or its path's on Azure): an
// exact row first, else the most specific pattern with `*` (the one with the most characters
// besides its stars; equal ones by file order), else `default`, else none (an AI route with a
// money budget then refuses it with a 400). A request that asks for a dearer service tier
// (`service_tier: priority`, `scale`) is priced by a row `<model>@<tier>`, and refused without
// one; a cheaper one (`flex`) by its own row, or the standard one. A request that sends or asks
// for audio on a row without audio prices is refused: no dimension a client chooses goes unpriced.
//
// Defaults follow the providers' published ratios: cached input at the input price (OpenAI and
// Anthropic bill less: an over-count), Anthropic's cache writes at 1.25 × input for five minutes
// and 2 × input for an hour.
import { microDollars } from "../limits/budget-reservation.js";

/** A model's prices in pico-dollars per token. */
export interface ModelPrice {
  /** The row that priced it (`gpt-4o`, `gpt-4o-mini*`, `default`): logs and the admin API. */
  readonly row: string;
  readonly input: number;
  readonly output: number;
  /** Input read from the provider's prompt cache. */
  readonly cachedInput: number;
  /** Input written to Anthropic's prompt cache for five minutes, and for an hour. */
  readonly cacheWrite: number;
  readonly cacheWrite1h: number;
  /** Audio in and out (OpenAI's audio models); undefined: the row prices no audio. */
  readonly audioInput: number | undefined;
  readonly audioOutput: number | undefined;
}

export interface PriceRow {
  input: number;
  output: number;
  cached_input?: number | undefined;
  cache_write?: number | undefined;
  cache_write_1h?: number | undefined;
  audio_input?: number | undefined;
  audio_output?: number | undefined;
}

/** The service tiers that bill above the standard price: never priced as standard. */
const DEARER_TIERS = new Set(["priority", "scale"]);

/**
 * Whether a number as written has at most six decimals: it survives rounding to them (1.0000001
 * and 1e-8 do not; 199.99, whose binary value is not exact, does).
 */
export function atMostSixDecimals(value: number): boolean {
  return Number.isFinite(value) && Number(value.toFixed(6)) === value;
}

/** Pico-dollars per token for `dollarsPerMillion`, or why it cannot be one. */
export function parsePrice(dollarsPerMillion: number): number | string {
  if (!Number.isFinite(dollarsPerMillion) || dollarsPerMillion < 0)
    return "a price is a number of dollars per million tokens, 0 or more";
  if (!atMostSixDecimals(dollarsPerMillion))
    return `${dollarsPerMillion} has more than six decimals: prices are kept to the millionth of a dollar per million tokens`;
  const pico = Math.round(dollarsPerMillion * 1_000_000);
  if (pico > 1e12) return "a price above $1,000,000 per million tokens is not one tollgate can hold";
  return pico;
}

/** The table as the config writes it, compiled once per config. */
export class PriceTable {
  private readonly exact = new Map<string, ModelPrice>();
  private readonly patterns: { name: string; regex: RegExp; weight: number; price: ModelPrice }[] = [];
  private readonly fallback: ModelPrice | undefined;

  constructor(rows: Readonly<Record<string, PriceRow>>) {
    let fallback: ModelPrice | undefined;
    for (const [name, row] of Object.entries(rows)) {
      const price = compileRow(name, row);
      if (name === "default") fallback = price;
      else if (name.includes("*"))
        this.patterns.push({ name, regex: globRegex(name), weight: name.replaceAll("*", "").length, price });
      else this.exact.set(name, price);
    }
    // Most specific first; the sort is stable, so equal weights keep the file's order.
    this.patterns.sort((a, b) => b.weight - a.weight);
    this.fallback = fallback;
  }

  /**
   * The prices of `model` (undefined: the request named none) at `tier` (its service_tier, if any),
   * or undefined when no row prices it.
   */
  priceOf(model: string | undefined, tier?: string): ModelPrice | undefined {
    if (tier !== undefined && tier !== "auto" && tier !== "default") {
      const tiered = model === undefined ? undefined : this.lookupTier(model, tier);
      if (tiered || DEARER_TIERS.has(tier)) return tiered;
    }
    return (model === undefined ? undefined : this.lookup(model)) ?? this.fallback;
  }

  /**
   * The row of `model` at `tier`: `<model>@<tier>`, or a pattern written for that tier
   * (`gpt-4o*@priority`). A pattern for the standard price (`gpt-4o*`) would match the tiered
   * name too (`*` matches `@`, which model ids such as Vertex's hold), so only rows that name
   * the tier are read.
   */
  private lookupTier(model: string, tier: string): ModelPrice | undefined {
    const name = `${model}@${tier}`;
    const exact = this.exact.get(name);
    if (exact) return exact;
    const suffix = `@${tier}`;
    for (const p of this.patterns) if (p.name.endsWith(suffix) && p.regex.test(name)) return p.price;
    return undefined;
  }

  private lookup(name: string): ModelPrice | undefined {
    const exact = this.exact.get(name);
    if (exact) return exact;
    for (const p of this.patterns) if (p.regex.test(name)) return p.price;
    return undefined;
  }
}

function compileRow(name: string, row: PriceRow): ModelPrice {
  const pico = (dollars: number) => {
    const parsed = parsePrice(dollars);
    // The config checks refuse such a price; a table built without them must not guess.
    if (typeof parsed === "string") throw new Error(`models.${name}: ${parsed}`);
    return parsed;
  };
  const input = pico(row.input);
  return {
    row: name,
    input,
    output: pico(row.output),
    cachedInput: row.cached_input === undefined ? input : pico(row.cached_input),
    cacheWrite: row.cache_write === undefined ? Math.ceil(input * 1.25) : pico(row.cache_write),
    cacheWrite1h: row.cache_write_1h === undefined ? input * 2 : pico(row.cache_write_1h),
    audioInput: row.audio_input === undefined ? undefined : pico(row.audio_input),
    audioOutput: row.audio_output === undefined ? undefined : pico(row.audio_output),
  };
}

/** `gpt-4o*` as a whole-string match, every other character literal. */
export function globRegex(pattern: string): RegExp {
  const escaped = pattern.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replaceAll("*", ".*");
  return new RegExp(`^${escaped}$`, "s");
}

/** What an answer used, by kind, as an AI route's format reports it (usage/ai-usage.ts). */
export interface ReportedUsage {
  /** Input tokens read at the full input price (uncached), audio ones among them. */
  input: number;
  /** Input tokens read from the prompt cache. */
  cachedInput: number;
  /** Input tokens written to the prompt cache, the hour-long writes among them. */
  cacheWrite: number;
  output: number;
  /** Of `input`, audio; of `output`, audio; of `cacheWrite`, written for an hour (0 when unreported). */
  audioInput?: number;
  audioOutput?: number;
  cacheWrite1h?: number;
}

/** Every token of a usage: what a token budget is charged. */
export function totalTokens(u: ReportedUsage): number {
  return u.input + u.cachedInput + u.cacheWrite + u.output;
}

/**
 * What a usage costs at `price`, in micro-dollars, rounded up once. Audio reported on a row
 * without audio prices (the request did not say it would use any) is priced at the dearest price
 * of the row: an over-count, never a discount.
 */
export function usageMicroDollars(u: ReportedUsage, price: ModelPrice): number {
  const audioIn = Math.min(u.input, u.audioInput ?? 0);
  const audioOut = Math.min(u.output, u.audioOutput ?? 0);
  const hour = Math.min(u.cacheWrite, u.cacheWrite1h ?? 0);
  const dearest = Math.max(price.input, price.output, price.cacheWrite1h);
  return microDollars([
    [u.input - audioIn, price.input],
    [audioIn, price.audioInput ?? dearest],
    [u.cachedInput, price.cachedInput],
    [u.cacheWrite - hour, price.cacheWrite],
    [hour, price.cacheWrite1h],
    [u.output - audioOut, price.output],
    [audioOut, price.audioOutput ?? dearest],
  ]);
}

/** The dearest a token of input (and of output) can be billed at this row, for a reservation. */
export function dearestPrices(price: ModelPrice): { input: number; output: number } {
  return {
    input: Math.max(
      price.input,
      price.cachedInput,
      price.cacheWrite,
      price.cacheWrite1h,
      price.audioInput ?? 0,
    ),
    output: Math.max(price.output, price.audioOutput ?? 0),
  };
}
