// Which numbers of a response body are its token usage: the route key `usage_fields`.
//
// Each entry is one way an upstream reports usage, a dotted path from the top-level JSON object
// (`usage.total_tokens`) or a sum of such paths (`usage.prompt_tokens + usage.completion_tokens`).
// The entries are alternatives in order of preference: the first one whose every path was
// reported is the usage, so a body that reports a total and its parts is charged the total once,
// never both. Arrays are not entered (a path names object members only): usage lives beside the
// choices, not inside them.

/** One dotted path, split at the dots: `["usage", "total_tokens"]`. */
export type UsagePath = readonly string[];
/** Paths whose values are added; it counts only when every one of them was reported. */
export type UsageSum = readonly UsagePath[];
/** Alternatives, most preferred first. */
export type UsageFields = readonly UsageSum[];

const NAME = /^[A-Za-z0-9_-]+$/;

/**
 * The defaults, in this order because the first complete alternative wins:
 * 1. `usage.total_tokens`: OpenAI chat completions, completions, embeddings and the Responses API
 *    as JSON, and the final chunk of a chat stream sent with `stream_options.include_usage`.
 * 2. `usage.prompt_tokens + usage.completion_tokens`: OpenAI-compatible servers that leave the
 *    total out.
 * 3. `usage.input_tokens + usage.output_tokens`: Anthropic messages as JSON, and an Anthropic
 *    stream whose `message_delta` carries the cumulative input count too (server tools, some
 *    Anthropic-compatible gateways that report 0 input tokens at the start).
 * 4. `message.usage.input_tokens + usage.output_tokens`: an Anthropic stream, where
 *    `message_start` carries the input count and each `message_delta` the cumulative output
 *    count (a later event's value replaces an earlier one, so the last delta is what counts).
 * 5. `response.usage.total_tokens`: a Responses API stream, whose `response.completed` (or
 *    `response.incomplete`, `response.failed`) event carries the whole response object.
 * The shapes do not overlap, so the order matters only for a body that carries two of them.
 */
export const DEFAULT_USAGE_FIELDS: UsageFields = freeze([
  [["usage", "total_tokens"]],
  [
    ["usage", "prompt_tokens"],
    ["usage", "completion_tokens"],
  ],
  [
    ["usage", "input_tokens"],
    ["usage", "output_tokens"],
  ],
  [
    ["message", "usage", "input_tokens"],
    ["usage", "output_tokens"],
  ],
  [["response", "usage", "total_tokens"]],
]);

export type ParsedUsageFields = { fields: UsageFields } | { error: string; at: number };

/**
 * Reads `usage_fields` as written: one entry or a list of them. `at` is the index of the entry
 * the error is about (0 for a single entry, and for an empty list, which has no entry to name).
 */
export function parseUsageFields(written: string | readonly string[]): ParsedUsageFields {
  const entries = typeof written === "string" ? [written] : written;
  if (entries.length === 0) {
    return { error: "usage_fields is empty: name at least one token field, e.g. usage.total_tokens", at: 0 };
  }
  const fields: UsagePath[][] = [];
  for (const [at, entry] of entries.entries()) {
    const sum = parseEntry(entry);
    if (typeof sum === "string") return { error: `usage_fields entry ${JSON.stringify(entry)}: ${sum}`, at };
    fields.push(sum);
  }
  return { fields: freeze(fields) };
}

/** The entry's paths, or what is wrong with it. */
function parseEntry(entry: string): UsagePath[] | string {
  if (entry.trim() === "") {
    return "is empty: write a dotted path like usage.total_tokens, or paths joined by +";
  }
  const sum: UsagePath[] = [];
  const seen = new Set<string>();
  for (const term of entry.split("+")) {
    const text = term.trim();
    if (text === "") return "has a + with no path on one side: write usage.a + usage.b";
    const names = text.split(".");
    for (const name of names) {
      if (name === "") return `path "${text}" has an empty name between dots`;
      if (!NAME.test(name)) {
        return `"${name}" in "${text}" is not a field name: names are letters, digits, _ and -, joined by dots`;
      }
      // The meters follow object keys only, never into arrays (choices[0]): a path through one
      // would never match, and every request would be charged as if it reported nothing.
      if (/^\d+$/.test(name)) {
        return `"${name}" in "${text}" reads like an array index, and arrays are not followed: usage is read from objects (usage.total_tokens, message.usage.input_tokens)`;
      }
    }
    if (seen.has(text)) return `names ${text} twice, which would count it twice`;
    seen.add(text);
    sum.push(names);
  }
  return sum;
}

/** A usage_fields entry spelled as written: `usage.prompt_tokens + usage.completion_tokens`. */
export function formatUsageSum(sum: UsageSum): string {
  return sum.map((path) => path.join(".")).join(" + ");
}

function freeze(fields: (readonly (readonly string[])[])[]): UsageFields {
  return Object.freeze(fields.map((sum) => Object.freeze(sum.map((path) => Object.freeze([...path])))));
}
