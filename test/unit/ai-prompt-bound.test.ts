// The prompt bound of AI routes (src/ai/request.ts) against what an OpenAI upstream reports as
// prompt_tokens, on the sample kept in test/fixtures/ai-prompts.json: the o200k tokenizer's chat
// count for gpt-4o (gpt-tokenizer, the tokenizer OpenAI's models use, with the chat template's
// tokens per message), plus the tokens of any tool definitions as JSON (an over-count of what
// OpenAI renders them as). The bound must never be below it: a reservation then holds every
// prompt token the request can cost. How far above it is, is the price of that guarantee (a
// request near the end of a budget is refused, or clamped, sooner); the figures are printed and
// quoted in docs/ai-budgets.md.
import { readFileSync } from "node:fs";
import { encode } from "gpt-tokenizer";
import { encodeChat } from "gpt-tokenizer/model/gpt-4o";
import { describe, expect, it } from "vitest";
import { OPERATIONS } from "../../src/ai/operations.js";
import { parseAiRequest } from "../../src/ai/request.js";
import type { AiSettings } from "../../src/ai/settings.js";

interface Sample {
  name: string;
  body: { messages: { role: string; content: string | { type: string; text: string }[] }[]; tools?: unknown };
}

const { samples } = JSON.parse(
  readFileSync(new URL("../fixtures/ai-prompts.json", import.meta.url), "utf8"),
) as { samples: Sample[] };

const settings: AiSettings = {
  format: "openai",
  maxOutput: 1024,
  clamp: false,
  minOutput: 16,
  outputField: "max_completion_tokens",
  imageTokens: 1600,
  referencedInputTokens: 128_000,
};

/** What an OpenAI upstream reports as prompt_tokens for the sample (see above). */
function reported(sample: Sample): number {
  const messages = sample.body.messages.map((m) => ({
    role: m.role as "user",
    content: typeof m.content === "string" ? m.content : m.content.map((p) => p.text).join(""),
  }));
  const tools = sample.body.tools === undefined ? 0 : encode(JSON.stringify(sample.body.tools)).length;
  return encodeChat(messages).length + tools;
}

describe("the prompt bound against the o200k tokenizer", () => {
  it("is never below what the upstream reports, on every sample", () => {
    const chat = OPERATIONS.openai.find((o) => o.name === "chat")!;
    const ratios: { name: string; bound: number; tokens: number; ratio: number }[] = [];
    for (const sample of samples) {
      const parsed = parseAiRequest(Buffer.from(JSON.stringify(sample.body)), chat, settings);
      if (!parsed.ok) throw new Error(`${sample.name}: ${parsed.detail}`);
      const tokens = reported(sample);
      const bound = parsed.request.promptBound;
      ratios.push({ name: sample.name, bound, tokens, ratio: bound / tokens });
      expect(bound, sample.name).toBeGreaterThanOrEqual(tokens);
    }
    const sorted = ratios.map((r) => r.ratio).sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)]!;
    const total = ratios.reduce((s, r) => s + r.bound, 0) / ratios.reduce((s, r) => s + r.tokens, 0);
    console.log(
      `prompt bound / o200k tokens over ${ratios.length} samples: median ${median.toFixed(2)}×, ` +
        `min ${sorted[0]!.toFixed(2)}× (${ratios.find((r) => r.ratio === sorted[0])!.name}), ` +
        `max ${sorted.at(-1)!.toFixed(2)}× (${ratios.find((r) => r.ratio === sorted.at(-1))!.name}), all tokens ${total.toFixed(2)}×`,
    );
    expect(ratios).toHaveLength(samples.length);
  });
});
