// An AI route's request body, read: its model, output ceiling, choices, `stream`, and an upper
// bound of its prompt's tokens, from bytes the client wrote and nothing it claims elsewhere (a
// header). Everything here is pure: the body is already in memory (proxy/ai-body.ts read it,
// bounded by max_body). A body that cannot be read the way every upstream reads it is refused
// with a 400 that names why: not UTF-8, not JSON, not an object, a key given twice, a field of
// the wrong type.
//
// The prompt bound. With a byte-level tokenizer (OpenAI's o200k and cl100k, and the BPEs of
// Llama, Mistral and Qwen) every token stands for at least one byte of the text, so a request
// body's byte length bounds the tokens of every string in it, and its JSON syntax (at least ~30
// bytes per message) more than covers the few tokens a chat template adds per message. Two
// things a body carries are not text: an image, whose tokens follow its pixel size whatever its
// encoding (a base64 image of 1 MB is ~1,100 tokens at OpenAI's high detail; one by URL is a few
// bytes), is counted at ai.image_tokens in place of its bytes; and Anthropic's tool use adds a
// system prompt of its own (up to ~700 tokens for its text editor tool) when a request has tools,
// counted at ANTHROPIC_TOOLS_TOKENS. docs/ai-budgets.md gives the bound's error, measured
// against a tokenizer on the sample in test/fixtures/ai-prompts.json.
import { type JsonObjectLayout, type MemberEdit, objectLayout, withMembers } from "./json-members.js";
import type { AiOperation } from "./operations.js";
import type { AiSettings } from "./settings.js";

/** What Anthropic adds to a request with tools: its tool-use system prompt, at most ~700 tokens. */
export const ANTHROPIC_TOOLS_TOKENS = 1000;

/** The content-part types that are images, across the formats (their strings are not text). */
const IMAGE_PARTS = new Set(["image_url", "input_image", "image"]);

/** How deep the walk for images goes: far deeper than any API's message shape. */
const MAX_WALK_DEPTH = 64;

export interface AiRequest {
  readonly operation: AiOperation;
  /** The body as the client sent it: forwarded as it is when nothing is changed. */
  readonly bytes: Buffer;
  readonly text: string;
  readonly layout: JsonObjectLayout;
  /** The top-level members (what `body:<field>` keys read). */
  readonly fields: Readonly<Record<string, unknown>>;
  /** `model`, when the body names one. */
  readonly model: string | undefined;
  readonly stream: boolean;
  /** The output ceiling per completion the request asks for (the largest of its fields); undefined: none. */
  readonly ceiling: number | undefined;
  /** Completions generated (`n`, `best_of`; 1 without). */
  readonly choices: number;
  /** An upper bound of its input tokens (see above). */
  readonly promptBound: number;
  /** Images attached, each counted at ai.image_tokens. */
  readonly images: number;
}

export type ParsedAiRequest = { ok: true; request: AiRequest } | { ok: false; detail: string };

const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function refused(detail: string): ParsedAiRequest {
  return { ok: false, detail };
}

/** Reads `bytes` as `operation`'s request on a route of `settings`. Never throws on what a client sends. */
export function parseAiRequest(bytes: Buffer, operation: AiOperation, settings: AiSettings): ParsedAiRequest {
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    return refused("the request body is not UTF-8 text: an AI route reads JSON, which is UTF-8");
  }
  if (text.charCodeAt(0) === 0xfeff)
    return refused(
      "the request body starts with a byte order mark, which JSON does not allow: send it without",
    );
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return refused("the request body is not valid JSON: an AI route reads the model and its limits from it");
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
    return refused('the request body must be a JSON object ({ "model": …, … })');
  const fields = parsed as Record<string, unknown>;
  const layout = objectLayout(text);
  if (layout.duplicate !== undefined)
    return refused(
      `the request body gives "${layout.duplicate}" more than once; upstreams differ on which copy they read, so give it once`,
    );

  const model = fields.model;
  if (model !== undefined && model !== null && typeof model !== "string")
    return refused('"model" must be a string naming the model');
  const stream = fields.stream;
  if (stream !== undefined && stream !== null && typeof stream !== "boolean")
    return refused('"stream" must be true or false');

  let ceiling: number | undefined;
  for (const field of operation.ceilingFields) {
    const value = wholeOrNull(fields[field]);
    if (value === false) return refused(`"${field}" must be a whole number of tokens, 1 or more`);
    if (value !== null) ceiling = Math.max(ceiling ?? 0, value);
  }
  let choices = 1;
  for (const field of operation.choiceFields) {
    const value = wholeOrNull(fields[field]);
    if (value === false) return refused(`"${field}" must be a whole number, 1 or more`);
    if (value !== null) choices = Math.max(choices, value);
  }
  if (operation.asksForUsage) {
    const options = fields.stream_options;
    if (options !== undefined && options !== null && (typeof options !== "object" || Array.isArray(options)))
      return refused('"stream_options" must be an object');
  }

  const images = imagesIn(fields);
  const tools =
    settings.format === "anthropic" && Array.isArray(fields.tools) && fields.tools.length > 0
      ? ANTHROPIC_TOOLS_TOKENS
      : 0;
  const promptBound = bytes.length - images.bytes + images.count * settings.imageTokens + tools;
  return {
    ok: true,
    request: {
      operation,
      bytes,
      text,
      layout,
      fields,
      model: typeof model === "string" ? model : undefined,
      stream: stream === true,
      ceiling,
      choices,
      promptBound: Math.max(1, promptBound),
      images: images.count,
    },
  };
}

/** A whole number ≥ 1, null for absent or null (the API's default), false for anything else. */
function wholeOrNull(value: unknown): number | null | false {
  if (value === undefined || value === null) return null;
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 1 ? value : false;
}

/**
 * The image parts anywhere in the body and the UTF-8 bytes of their strings (a data: URL or a
 * base64 `data`, a URL, a detail level), which the prompt bound counts at ai.image_tokens
 * instead. The text they were parsed from is at least as long (escapes only lengthen it), so
 * taking them away never takes away bytes of anything else.
 */
function imagesIn(root: unknown): { count: number; bytes: number } {
  let count = 0;
  let bytes = 0;
  const stack: { value: unknown; depth: number }[] = [{ value: root, depth: 0 }];
  while (stack.length > 0) {
    const { value, depth } = stack.pop()!;
    if (value === null || typeof value !== "object" || depth > MAX_WALK_DEPTH) continue;
    if (Array.isArray(value)) {
      for (const v of value) stack.push({ value: v, depth: depth + 1 });
      continue;
    }
    const object = value as Record<string, unknown>;
    if (typeof object.type === "string" && IMAGE_PARTS.has(object.type)) {
      count++;
      bytes += stringBytes(object);
      continue;
    }
    for (const key in object) stack.push({ value: object[key], depth: depth + 1 });
  }
  return { count, bytes };
}

/** The UTF-8 bytes of every string value inside `value`. */
function stringBytes(value: unknown): number {
  let total = 0;
  const stack: unknown[] = [value];
  let steps = 0;
  while (stack.length > 0 && steps++ < 100_000) {
    const v = stack.pop();
    if (typeof v === "string") total += Buffer.byteLength(v, "utf8");
    else if (v !== null && typeof v === "object")
      for (const k in v) stack.push((v as Record<string, unknown>)[k]);
  }
  return total;
}

/**
 * The body to forward with `output` tokens per completion: every ceiling field the request gave
 * above `output` lowered to it, the route's own written in when it gave none, and a stream that
 * reports usage only when asked asked to (`stream_options.include_usage: true`). Unchanged, the
 * client's own bytes.
 */
export function forwardedBody(request: AiRequest, output: number | undefined, settings: AiSettings): Buffer {
  const edits: MemberEdit[] = [];
  const op = request.operation;
  if (output !== undefined && op.ceilingFields.length > 0) {
    let named = false;
    for (const field of op.ceilingFields) {
      const value = request.fields[field];
      if (typeof value !== "number") continue;
      named = true;
      if (value > output) edits.push({ key: field, json: String(output) });
    }
    if (!named) edits.push({ key: op.writeField ?? settings.outputField, json: String(output) });
  }
  if (op.asksForUsage && request.stream) {
    const options = request.fields.stream_options;
    if (options === undefined || options === null)
      edits.push({ key: "stream_options", json: '{"include_usage":true}' });
    else if ((options as Record<string, unknown>).include_usage !== true)
      edits.push({
        key: "stream_options",
        json: JSON.stringify({ ...(options as Record<string, unknown>), include_usage: true }),
      });
  }
  if (edits.length === 0) return request.bytes;
  return Buffer.from(withMembers(request.text, request.layout, edits), "utf8");
}
