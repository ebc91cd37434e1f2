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
// bytes), is counted at ai.image_tokens in place of its payload (the data URL, the base64 data,
// the URL: only where each format puts an image, a part of a message's content, and only a
// payload an upstream reads as an image, so no text can pass for one); and Anthropic's tool use
// adds a system prompt of its own (up to ~700 tokens for its text editor tool) when a request has
// tools, counted at ANTHROPIC_TOOLS_TOKENS. Input the body only names (the Responses API's
// `previous_response_id`, a stored conversation or prompt) is counted at
// ai.referenced_input_tokens. docs/ai-budgets.md gives the bound's error, measured
// against a tokenizer on the sample in test/fixtures/ai-prompts.json.
import { type JsonObjectLayout, type MemberEdit, objectLayout, withMembers } from "./json-members.js";
import type { AiOperation } from "./operations.js";
import type { AiSettings } from "./settings.js";

/** What Anthropic adds to a request with tools: its tool-use system prompt, at most ~700 tokens. */
export const ANTHROPIC_TOOLS_TOKENS = 1000;

/** How many prompts one request may batch (OpenAI allows 2,048 inputs in a list). */
const MAX_PROMPTS = 10_000;

export interface AiRequest {
  readonly operation: AiOperation;
  /** The body as the client sent it: forwarded as it is when nothing is changed. */
  readonly bytes: Buffer;
  readonly text: string;
  readonly layout: JsonObjectLayout;
  /** The top-level members, as parsed. */
  readonly fields: Readonly<Record<string, unknown>>;
  /** What `body:<field>` keys read: the members, with `model` the request's model. */
  readonly keyFields: Readonly<Record<string, unknown>>;
  /** `model`, when the body names one. */
  readonly model: string | undefined;
  readonly stream: boolean;
  /**
   * The output ceiling per completion the request asks for: the largest of its ceiling fields,
   * the vendor ones included; undefined: none.
   */
  readonly ceiling: number | undefined;
  /** The largest of the API's own ceiling fields it gives (what it asked of the API itself). */
  readonly ownCeiling: number | undefined;
  /** Completions generated: `n` or `best_of`, times the prompts a batch holds (1 without). */
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
/**
 * Reads `bytes` as `operation`'s request on a route of `settings`. `pathModel`: the model the
 * path names (Azure's `/deployments/<d>/`, `/engines/<m>/`), which such an upstream serves
 * whatever the body says: it is the request's model. Never throws on what a client sends.
 */
export function parseAiRequest(
  bytes: Buffer,
  operation: AiOperation,
  settings: AiSettings,
  pathModel?: string,
  /** The body's shape, when the caller measured it already (jsonShape). */
  shape?: JsonShape,
): ParsedAiRequest {
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
  const problem = (shape ?? jsonShape(bytes)).problem;
  if (problem) return refused(problem);
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
  const spelling = foldedSpelling(layout.members, operation);
  if (spelling) return refused(spelling);

  // The SDKs' own option, merged into the body by them, never sent as a member; a proxy behind
  // the gateway (LiteLLM) that merges a member of that name would forward fields the gateway
  // never read, its ceilings among them.
  if (Object.hasOwn(fields, "extra_body"))
    return refused(
      '"extra_body" is not a field of the API: merge its members into the body itself, where the gateway reads them',
    );
  const tier = fields.service_tier;
  if (
    tier !== undefined &&
    tier !== null &&
    !(typeof tier === "string" && SERVICE_TIERS[settings.format].has(tier))
  )
    return refused(
      `"service_tier" must be one of ${[...SERVICE_TIERS[settings.format]].map((t) => `"${t}"`).join(", ")}, written as the API writes it`,
    );
  const model = fields.model;
  if (model !== undefined && model !== null && typeof model !== "string")
    return refused('"model" must be a string naming the model');
  const stream = fields.stream;
  if (stream !== undefined && stream !== null && typeof stream !== "boolean")
    return refused('"stream" must be true or false');

  let ceiling: number | undefined;
  let ownCeiling: number | undefined;
  for (const field of operation.ceilingFields) {
    const value = wholeOrNull(fields[field]);
    if (value === false) return refused(`"${field}" must be a whole number of tokens, 1 or more`);
    if (value === null) continue;
    ceiling = Math.max(ceiling ?? 0, value);
    if (operation.outputFields.includes(field)) ownCeiling = Math.max(ownCeiling ?? 0, value);
  }
  let choices = 1;
  for (const field of operation.choiceFields) {
    const value = wholeOrNull(fields[field]);
    if (value === false) return refused(`"${field}" must be a whole number, 1 or more`);
    if (value !== null) choices = Math.max(choices, value);
  }
  const prompts =
    operation.promptsField === undefined
      ? 1
      : promptCount(fields[operation.promptsField]) + embeddedPromptCount(fields.prompt_embeds);
  if (prompts > MAX_PROMPTS)
    return refused(
      `"${operation.promptsField}" batches more than ${MAX_PROMPTS} prompts; send fewer at once`,
    );
  choices *= prompts;
  if (operation.asksForUsage) {
    const options = fields.stream_options;
    if (options !== undefined && options !== null && (typeof options !== "object" || Array.isArray(options)))
      return refused('"stream_options" must be an object');
    // Read whole by the gateway and rewritten from what it read: a key twice in it would leave
    // the upstream reading another copy.
    const member = layout.members.find((m) => m.key === "stream_options");
    if (
      member &&
      options !== null &&
      objectLayout(text.slice(member.start, member.end)).duplicate !== undefined
    )
      return refused('"stream_options" gives a key more than once; give each once');
  }

  const images = imagesIn(fields, settings.format);
  const tools =
    settings.format === "anthropic" && Array.isArray(fields.tools) && fields.tools.length > 0
      ? ANTHROPIC_TOOLS_TOKENS
      : 0;
  const references = referencesIn(fields, settings.format);
  const referenced =
    ((operation.referenceFields?.some((f) => fields[f] !== undefined && fields[f] !== null) ?? false)
      ? 1
      : 0) + references.inputs;
  const promptBound =
    bytes.length -
    images.bytes +
    (images.count + references.images) * settings.imageTokens +
    tools +
    referenced * settings.referencedInputTokens;
  return {
    ok: true,
    request: {
      operation,
      bytes,
      text,
      layout,
      fields,
      // A path's model is the one served: the per-model limits count it, not the body's.
      keyFields: pathModel === undefined ? fields : { ...fields, model: pathModel },
      model: pathModel ?? (typeof model === "string" ? model : undefined),
      stream: stream === true,
      ceiling,
      ownCeiling,
      choices,
      promptBound: Math.max(1, promptBound),
      images: images.count,
    },
  };
}

/**
 * The most JSON values (counted by their separators and brackets) and the deepest nesting a body
 * may have. JSON.parse builds every value: 4 MB of `[{},{},…]` is over a million objects and a
 * gigabyte of heap, and blocks the event loop for most of a second, whoever sends it (found by an
 * attack: sixty such bodies from one refused caller ran a gateway out of memory). A real request,
 * token lists for embeddings included, has far fewer.
 */
export const MAX_JSON_VALUES = 500_000;
export const MAX_JSON_DEPTH = 256;

/** A body's JSON values (counted by separators and brackets), and why it cannot be parsed. */
export interface JsonShape {
  values: number;
  problem: string | undefined;
}

/** How many values `bytes` holds, and whether too many or too deep; one pass, no allocation. */
export function jsonShape(bytes: Uint8Array): JsonShape {
  let values = 0;
  let depth = 0;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c === 0x22) {
      // A string: to its closing quote, escapes skipped.
      for (i++; i < bytes.length; i++) {
        const d = bytes[i]!;
        if (d === 0x5c) i++;
        else if (d === 0x22) break;
      }
    } else if (c === 0x7b || c === 0x5b) {
      values++;
      if (++depth > MAX_JSON_DEPTH)
        return {
          values,
          problem: `the request body nests deeper than ${MAX_JSON_DEPTH} levels; no API's request does`,
        };
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    } else if (c === 0x2c) {
      values++;
    } else continue;
    if (values > MAX_JSON_VALUES)
      return {
        values,
        problem: `the request body holds more than ${MAX_JSON_VALUES} values; send fewer (split a batch)`,
      };
  }
  return { values, problem: undefined };
}

/**
 * The service tiers each API takes: another spelling ("Priority") or value would reach an
 * upstream that reads it its own way while the gateway priced it as the default.
 */
/** Top-level fields the gateway reads besides an operation's ceiling, choice and prompt fields. */
const READ_FIELDS = [
  "model",
  "stream",
  "stream_options",
  "service_tier",
  "messages",
  "input",
  "prompt",
  "prompt_embeds",
  "tools",
  "system",
  "instructions",
  "previous_response_id",
  "extra_body",
];

/**
 * How Go's encoding/json (and ASP.NET's default binder) match a key to a field: letter case
 * aside, and with the Kelvin sign as `k` and the long s as `s` (Go's fold). An upstream reading
 * `"MAX_TOKENS"` or `"Model"` as the field the gateway read under its own spelling would run
 * what was never counted.
 */
function foldKey(key: string): string {
  return key.toLowerCase().replaceAll("\u017f", "s");
}

/** The fields read of `operation`'s bodies, built once per operation (they are a fixed table). */
const READ_BY_OPERATION = new WeakMap<AiOperation, ReadonlySet<string>>();
function readFields(operation: AiOperation): ReadonlySet<string> {
  let read = READ_BY_OPERATION.get(operation);
  if (!read) {
    read = new Set([
      ...READ_FIELDS,
      ...operation.ceilingFields,
      ...operation.choiceFields,
      ...(operation.promptsField ? [operation.promptsField] : []),
    ]);
    READ_BY_OPERATION.set(operation, read);
  }
  return read;
}

/**
 * A key another spelling of which the gateway reads (`"Model"`, `"MAX_TOKENS"`, `"N"`), or two
 * keys that fold together: why the body is refused, or undefined.
 */
function foldedSpelling(members: readonly { key: string }[], operation: AiOperation): string | undefined {
  const read = readFields(operation);
  const seen = new Map<string, string>();
  for (const { key } of members) {
    const folded = foldKey(key);
    if (folded !== key && read.has(folded))
      return `the request body gives "${key}", which some upstreams read as "${folded}"; the gateway reads "${folded}" as written, so spell it that way`;
    const other = seen.get(folded);
    if (other !== undefined)
      return `the request body gives both "${other}" and "${key}", which some upstreams read as one field; give it once`;
    seen.set(folded, key);
  }
  return undefined;
}

const SERVICE_TIERS: Readonly<Record<AiSettings["format"], ReadonlySet<string>>> = {
  openai: new Set(["auto", "default", "flex", "scale", "priority"]),
  responses: new Set(["auto", "default", "flex", "scale", "priority"]),
  anthropic: new Set(["auto", "standard_only"]),
};

/** vLLM's `prompt_embeds` beside `prompt`: one more prompt each (a list, one per entry). */
function embeddedPromptCount(embeds: unknown): number {
  if (embeds === undefined || embeds === null) return 0;
  return Array.isArray(embeds) ? embeds.length : 1;
}

/**
 * Input a request names but does not carry, where its format puts it: a stored file
 * (`file_id`, a `file_url`, Anthropic's `url` or `file` document source), an earlier item
 * (`item_reference`), an earlier answer's audio (`messages[].audio.id`); each reserves
 * ai.referenced_input_tokens, and a stored or linked image ai.image_tokens, since their bytes
 * in the body say nothing of their size.
 */
function referencesIn(
  fields: Readonly<Record<string, unknown>>,
  format: AiSettings["format"],
): { inputs: number; images: number } {
  const found = { inputs: 0, images: 0 };
  forEachPart(fields, format, (p) => {
    const kind = referenceOf(p, format);
    if (kind === "input") found.inputs++;
    else if (kind === "image") found.images++;
    return kind !== undefined;
  });
  if (format === "openai" && Array.isArray(fields.messages))
    for (const m of fields.messages)
      if (isObject(m) && isObject(m.audio) && m.audio.id !== undefined) found.inputs++;
  return found;
}

function referenceOf(
  p: Readonly<Record<string, unknown>>,
  format: AiSettings["format"],
): "input" | "image" | undefined {
  const given = (v: unknown) => v !== undefined && v !== null;
  switch (format) {
    case "openai":
      return p.type === "file" && isObject(p.file) && given(p.file.file_id) ? "input" : undefined;
    case "responses":
      if (p.type === "item_reference") return "input";
      if (p.type === "input_file" && (given(p.file_id) || given(p.file_url))) return "input";
      return p.type === "input_image" && given(p.file_id) && !given(p.image_url) ? "image" : undefined;
    case "anthropic": {
      if (!isObject(p.source)) return undefined;
      const sourceType = p.source.type;
      if (p.type === "document" && (sourceType === "url" || sourceType === "file")) return "input";
      return p.type === "image" && sourceType === "file" ? "image" : undefined;
    }
  }
}

/** A whole number ≥ 1, null for absent or null (the API's default), false for anything else. */
function wholeOrNull(value: unknown): number | null | false {
  if (value === undefined || value === null) return null;
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 1 ? value : false;
}

/**
 * How many prompts a `prompt` holds: a string or a list of token ids is one, a list of strings
 * (or of token lists) one per entry.
 */
function promptCount(prompt: unknown): number {
  if (!Array.isArray(prompt)) return 1;
  return prompt.every((p) => typeof p === "number") ? 1 : Math.max(1, prompt.length);
}

/**
 * The images of a request where its format puts them, and the UTF-8 bytes of their payloads,
 * which the prompt bound counts at ai.image_tokens instead: a part of a message's content (and,
 * for the Responses API, an input item or a part of its content; for Anthropic, a part of a
 * tool result's content) whose type is the format's image type. Only the payload goes (a data
 * URL of an image, a URL, Anthropic's base64 data of an image type), never the part's other
 * members nor anything elsewhere: a client cannot make text count as an image, and a payload
 * that is not an image is an error to the upstream, never tokens. The text the payloads were
 * parsed from is at least as long (escapes only lengthen it), so taking them away never takes
 * away bytes of anything else.
 */
function imagesIn(
  fields: Readonly<Record<string, unknown>>,
  format: AiSettings["format"],
): {
  count: number;
  bytes: number;
} {
  const found = { count: 0, bytes: 0 };
  forEachPart(fields, format, (part) => {
    const payload = imagePayload(part, format);
    if (payload === undefined) return false;
    found.count++;
    found.bytes += Buffer.byteLength(payload, "utf8");
    return true;
  });
  return found;
}

/**
 * Calls `visit` on each content part where the format puts them: a message's content (for
 * Anthropic, and a tool result's content inside it, unless `visit` took the part itself), or
 * for the Responses API an input item and a part of its content.
 */
function forEachPart(
  fields: Readonly<Record<string, unknown>>,
  format: AiSettings["format"],
  visit: (part: Record<string, unknown>) => boolean,
): void {
  const parts = (content: unknown, nested: boolean) => {
    if (!Array.isArray(content)) return;
    for (const part of content) {
      if (!isObject(part) || visit(part)) continue;
      if (nested && part.type === "tool_result") parts(part.content, false);
    }
  };
  if (format === "responses") {
    const input = fields.input;
    parts(input, false);
    if (Array.isArray(input)) for (const item of input) if (isObject(item)) parts(item.content, false);
    return;
  }
  const messages = fields.messages;
  if (Array.isArray(messages))
    for (const m of messages) if (isObject(m)) parts(m.content, format === "anthropic");
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

const DATA_IMAGE = /^data:image\/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=\s]*$/i;
const WEB_URL = /^https?:\/\//i;
const BASE64 = /^[A-Za-z0-9+/=\s]*$/;

/** The image payload of a content part, or undefined when the part is no image this format reads. */
function imagePayload(part: unknown, format: AiSettings["format"]): string | undefined {
  if (!isObject(part)) return undefined;
  const isImage = (url: unknown): url is string =>
    typeof url === "string" && (DATA_IMAGE.test(url) || WEB_URL.test(url));
  switch (format) {
    case "openai": {
      if (part.type !== "image_url") return undefined;
      const url = isObject(part.image_url) ? part.image_url.url : part.image_url;
      return isImage(url) ? url : undefined;
    }
    case "responses":
      return part.type === "input_image" && isImage(part.image_url) ? part.image_url : undefined;
    case "anthropic": {
      if (part.type !== "image" || !isObject(part.source)) return undefined;
      const source = part.source;
      if (source.type === "url") return isImage(source.url) ? source.url : undefined;
      const imageType = typeof source.media_type === "string" && source.media_type.startsWith("image/");
      return source.type === "base64" &&
        imageType &&
        typeof source.data === "string" &&
        BASE64.test(source.data)
        ? source.data
        : undefined;
    }
  }
}

/**
 * The body to forward with `output` tokens per completion. It carries exactly one of the API's
 * own ceiling fields, the one the upstream reads (the operation's, or the route's
 * ai.output_field): at what the request asked of the API, at most `output`, or `output` when it
 * asked nothing (the others are taken out: OpenAI refuses two). A vendor's ceiling field above
 * `output` is lowered to it. A stream that reports usage only when asked is asked to
 * (`stream_options.include_usage: true`). Unchanged, the client's own bytes.
 */
export function forwardedBody(request: AiRequest, output: number | undefined, settings: AiSettings): Buffer {
  const edits: MemberEdit[] = [];
  const op = request.operation;
  if (output !== undefined && op.ceilingFields.length > 0) {
    const target = op.writeField ?? settings.outputField;
    const wanted = Math.min(request.ownCeiling ?? output, output);
    if (request.fields[target] !== wanted) edits.push({ key: target, json: String(wanted) });
    for (const field of op.outputFields)
      if (field !== target && Object.hasOwn(request.fields, field))
        edits.push({ key: field, json: undefined });
    for (const field of op.ceilingFields) {
      if (op.outputFields.includes(field)) continue;
      const value = request.fields[field];
      if (typeof value === "number" && value > output) edits.push({ key: field, json: String(output) });
    }
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
