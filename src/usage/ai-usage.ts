// What an AI route's answer reports it used, by kind (input, cached input, cache writes, output),
// read from the JSON body or the events of a stream as they pass to the client, with the scanners
// of json-scan.ts and sse.ts: nothing is held back and nothing of the body is kept.
//
// Each format reports in its own fields:
// - openai: `usage.prompt_tokens` (cached ones included, `usage.prompt_tokens_details.
//   cached_tokens` of them) and `usage.completion_tokens` (reasoning included), in the JSON
//   answer or the stream's final chunk (`stream_options.include_usage`, which the gateway asks
//   for); embeddings report prompt_tokens alone.
// - responses: `usage.input_tokens` (`input_tokens_details.cached_tokens` of them) and
//   `usage.output_tokens`; a stream carries them in the `response` of its `response.completed`
//   (or `.incomplete`, `.failed`) event.
// - anthropic: `usage.input_tokens` (uncached), `cache_creation_input_tokens`,
//   `cache_read_input_tokens` and `output_tokens`; a stream gives the input in `message_start`
//   (`message.usage`) and the cumulative output in each `message_delta` (`usage`), the last one
//   final (a later value of a field replaces an earlier one).
// The answer's usage counts only once the upstream's response has ended: a stream cut short
// reports what it had so far, which is not what it cost (settle.ts then keeps the reservation).
import type { ReportedUsage } from "../ai/prices.js";
import type { AiFormat } from "../ai/settings.js";
import { compileWatch, JsonScanner, type WatchTree } from "./json-scan.js";
import { bodyKind } from "./meter.js";
import { SseScanner } from "./sse.js";

/** The largest value one usage field may report; a larger one counts as this. */
export const MAX_AI_REPORTED = 100_000_000;

/** The watched paths of a format, in the order of the `Slot`s below. */
type Slot =
  | "prompt"
  | "completion"
  | "total"
  | "promptCached"
  | "input"
  | "output"
  | "inputCached"
  | "streamInput"
  | "streamOutput"
  | "streamInputCached"
  | "cacheWrite"
  | "cacheRead"
  | "startInput"
  | "startOutput"
  | "startCacheWrite"
  | "startCacheRead"
  | "promptAudio"
  | "completionAudio"
  | "cacheWrite1h"
  | "startCacheWrite1h";

const PATHS: Readonly<Record<AiFormat, Partial<Record<Slot, string>>>> = {
  openai: {
    prompt: "usage.prompt_tokens",
    completion: "usage.completion_tokens",
    total: "usage.total_tokens",
    promptCached: "usage.prompt_tokens_details.cached_tokens",
    promptAudio: "usage.prompt_tokens_details.audio_tokens",
    completionAudio: "usage.completion_tokens_details.audio_tokens",
  },
  responses: {
    input: "usage.input_tokens",
    output: "usage.output_tokens",
    inputCached: "usage.input_tokens_details.cached_tokens",
    streamInput: "response.usage.input_tokens",
    streamOutput: "response.usage.output_tokens",
    streamInputCached: "response.usage.input_tokens_details.cached_tokens",
  },
  anthropic: {
    input: "usage.input_tokens",
    output: "usage.output_tokens",
    cacheWrite: "usage.cache_creation_input_tokens",
    cacheRead: "usage.cache_read_input_tokens",
    startInput: "message.usage.input_tokens",
    startOutput: "message.usage.output_tokens",
    startCacheWrite: "message.usage.cache_creation_input_tokens",
    startCacheRead: "message.usage.cache_read_input_tokens",
    cacheWrite1h: "usage.cache_creation.ephemeral_1h_input_tokens",
    startCacheWrite1h: "message.usage.cache_creation.ephemeral_1h_input_tokens",
  },
};

interface FormatWatch {
  tree: WatchTree;
  /** The value index of each slot the format watches. */
  ids: Partial<Record<Slot, number>>;
}

const WATCHES = new Map<AiFormat, FormatWatch>();

function watchOf(format: AiFormat): FormatWatch {
  let watch = WATCHES.get(format);
  if (watch === undefined) {
    const slots = Object.entries(PATHS[format]) as [Slot, string][];
    const tree = compileWatch(slots.map(([, path]) => path.split(".")));
    const ids: Partial<Record<Slot, number>> = {};
    slots.forEach(([slot], i) => {
      ids[slot] = tree.ids[i]!;
    });
    watch = { tree, ids };
    WATCHES.set(format, watch);
  }
  return watch;
}

export interface AiUsageMeter {
  /** Every body chunk as it passes to the client; never throws. */
  write(chunk: Buffer): void;
  /** What the answer reported, or undefined when it reported no usable usage. */
  usage(): ReportedUsage | undefined;
}

/** A meter for an answer of `format` with this Content-Type; null when the type carries no usage. */
export function aiUsageMeter(format: AiFormat, contentType: string | undefined): AiUsageMeter | null {
  const kind = bodyKind(contentType);
  if (kind === null) return null;
  const { tree, ids } = watchOf(format);
  const values = new Float64Array(tree.pathCount).fill(Number.NaN);
  const json = new JsonScanner(tree, values, MAX_AI_REPORTED);
  const read = (slot: Slot): number | undefined => {
    const id = ids[slot];
    if (id === undefined || id < 0) return undefined;
    const v = values[id]!;
    return Number.isNaN(v) ? undefined : v;
  };
  const usage = () => usageOf(format, read);
  if (kind === "json") return { write: (chunk) => json.write(chunk, 0, chunk.length), usage };
  const sse = new SseScanner(json);
  return { write: (chunk) => sse.write(chunk), usage };
}

function usageOf(format: AiFormat, read: (slot: Slot) => number | undefined): ReportedUsage | undefined {
  switch (format) {
    case "openai": {
      const prompt = read("prompt");
      if (prompt === undefined) return undefined;
      const total = read("total");
      const completion = read("completion") ?? (total !== undefined ? Math.max(0, total - prompt) : 0);
      const cached = Math.min(prompt, read("promptCached") ?? 0);
      return {
        input: prompt - cached,
        cachedInput: cached,
        cacheWrite: 0,
        output: completion,
        audioInput: read("promptAudio") ?? 0,
        audioOutput: read("completionAudio") ?? 0,
      };
    }
    case "responses": {
      const input = read("input") ?? read("streamInput");
      const output = read("output") ?? read("streamOutput");
      if (input === undefined || output === undefined) return undefined;
      const cached = Math.min(input, read("inputCached") ?? read("streamInputCached") ?? 0);
      return { input: input - cached, cachedInput: cached, cacheWrite: 0, output };
    }
    case "anthropic": {
      const input = read("input") ?? read("startInput");
      const output = read("output") ?? read("startOutput");
      if (input === undefined || output === undefined) return undefined;
      return {
        input,
        cachedInput: read("cacheRead") ?? read("startCacheRead") ?? 0,
        cacheWrite: read("cacheWrite") ?? read("startCacheWrite") ?? 0,
        output,
        cacheWrite1h: read("cacheWrite1h") ?? read("startCacheWrite1h") ?? 0,
      };
    }
  }
}
