// The YAML's scalars with a unit (a duration, a rate, a size, a percentage) as zod schemas: the
// text is parsed by notation.ts, and a text that does not parse is refused with an example of the
// form. Shared by the config schema (schema.ts) and the limit keys each algorithm declares
// (limits/algorithms/), which schema.ts assembles; apart from schema.ts so neither imports the other.
import { z } from "zod";
import { parseDuration, parsePercent, parseRate, parseSize, parseWindow, WINDOW_FORMS } from "./notation.js";

function unitScalar<T>(what: string, example: string, parse: (s: string) => T | null) {
  return z
    .string({ error: `expected ${what} such as ${example}` })
    .describe(`${what}, e.g. ${example}`)
    .transform((text, ctx) => {
      const value = parse(text);
      if (value === null) {
        ctx.addIssue({ code: "custom", message: `"${text}" is not ${what}; write it like ${example}` });
        return z.NEVER;
      }
      return value;
    });
}

export const duration = () => unitScalar("a duration", "250ms, 5s, 15m, 1h or 1d", parseDuration);
export const rate = () => unitScalar("a rate", "10/s, 100/m, 1000/h or 5000/d", parseRate);
export const size = () => unitScalar("a size", "512kb or 1mb", parseSize);
export const percent = () => unitScalar("a percentage", "50%", parsePercent);

/** A limit's window: a duration, or one calendar period (`1 day`, `1 week`, `1 month`). */
export const limitWindow = () =>
  z
    .string({ error: `expected ${WINDOW_FORMS}` })
    .describe(`${WINDOW_FORMS}`)
    .transform((text, ctx) => {
      const parsed = parseWindow(text);
      if ("error" in parsed) {
        ctx.addIssue({ code: "custom", message: parsed.error });
        return z.NEVER;
      }
      return parsed.window;
    });
