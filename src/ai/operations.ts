// What an AI route serves, by its format: the operations a POST may ask for, known by the end
// of the request's path (so one route in front of OpenAI, Azure OpenAI, vLLM, Ollama or LiteLLM
// meters `/v1/chat/completions`, `/chat/completions` and `/openai/deployments/<d>/chat/completions`
// alike), and for each the fields that bound its output. Any other POST, PUT or PATCH on an AI
// route is refused: a body the gateway does not know how to meter is not forwarded at one token.
import type { AiFormat } from "./settings.js";

export interface AiOperation {
  /** For logs, metrics and refusals: `chat`, `completion`, `embedding`, `response`, `message`, `count`. */
  readonly name: string;
  /** The path's end that names it, as the refusal lists it. */
  readonly suffix: string;
  /**
   * Every request field that bounds its output tokens per completion in some server, the API's
   * own and the ones servers behind an OpenAI-compatible face read first (llama.cpp's
   * `n_predict`, Text Generation Inference's `max_new_tokens`): the largest one given is what it
   * may generate, and each is held to the reservation. Empty: it generates no output.
   */
  readonly ceilingFields: readonly string[];
  /**
   * The API's own ceiling fields: the forwarded body carries exactly one of them, `writeField`
   * (OpenAI refuses both max_tokens and max_completion_tokens in one request).
   */
  readonly outputFields: readonly string[];
  /** The one the forwarded body carries (undefined: the route's ai.output_field, for chat). */
  readonly writeField: string | undefined;
  /**
   * A field that may batch several prompts in one request (legacy completions' `prompt` as a
   * list): each generates its own completions.
   */
  readonly promptsField?: string;
  /**
   * Fields that bring in input the body does not carry (the Responses API's
   * `previous_response_id`, a stored `conversation` or `prompt`): such a request reserves
   * ai.referenced_input_tokens more.
   */
  readonly referenceFields?: readonly string[];
  /**
   * The ceiling the API applies to a request that gives none, when it has one (legacy
   * completions: 16 tokens): the request is held to it, not raised to ai.max_output.
   */
  readonly defaultCeiling?: number;
  /** The fields that multiply its output (`n`, `best_of`): the largest is the completions generated. */
  readonly choiceFields: readonly string[];
  /** A stream reports its usage only when asked (`stream_options.include_usage`): the gateway asks. */
  readonly asksForUsage: boolean;
  /** Nothing is generated or billed (Anthropic's token counting): nothing is reserved. */
  readonly free: boolean;
}

const op = (o: AiOperation): AiOperation => Object.freeze(o);

const CHAT = op({
  name: "chat",
  suffix: "/chat/completions",
  ceilingFields: ["max_completion_tokens", "max_tokens", "n_predict", "max_new_tokens"],
  outputFields: ["max_completion_tokens", "max_tokens"],
  writeField: undefined,
  choiceFields: ["n"],
  asksForUsage: true,
  free: false,
});
const COMPLETION = op({
  name: "completion",
  suffix: "/completions",
  // max_completion_tokens is chat's, but servers that map both onto one (vLLM, LiteLLM) read it
  // here too: held to the reservation and taken out of the forwarded body like max_tokens's twin.
  ceilingFields: ["max_tokens", "max_completion_tokens", "n_predict", "max_new_tokens"],
  outputFields: ["max_tokens", "max_completion_tokens"],
  writeField: "max_tokens",
  promptsField: "prompt",
  // OpenAI's and vLLM's default for /v1/completions.
  defaultCeiling: 16,
  choiceFields: ["n", "best_of"],
  asksForUsage: true,
  free: false,
});
const EMBEDDING = op({
  name: "embedding",
  suffix: "/embeddings",
  ceilingFields: [],
  outputFields: [],
  writeField: undefined,
  choiceFields: [],
  asksForUsage: false,
  free: false,
});
const RESPONSE = op({
  name: "response",
  suffix: "/responses",
  ceilingFields: ["max_output_tokens"],
  outputFields: ["max_output_tokens"],
  writeField: "max_output_tokens",
  referenceFields: ["previous_response_id", "conversation", "prompt"],
  choiceFields: [],
  asksForUsage: false,
  free: false,
});
const MESSAGE = op({
  name: "message",
  suffix: "/messages",
  ceilingFields: ["max_tokens"],
  outputFields: ["max_tokens"],
  writeField: "max_tokens",
  choiceFields: [],
  asksForUsage: false,
  free: false,
});
const COUNT = op({
  name: "count",
  suffix: "/messages/count_tokens",
  ceilingFields: [],
  outputFields: [],
  writeField: undefined,
  choiceFields: [],
  asksForUsage: false,
  free: true,
});

/** Each format's operations, the longer suffix first where one ends another. */
export const OPERATIONS: Readonly<Record<AiFormat, readonly AiOperation[]>> = {
  openai: [CHAT, COMPLETION, EMBEDDING],
  responses: [RESPONSE],
  anthropic: [COUNT, MESSAGE],
};

/** Methods that carry no body to meter: they pass an AI route as on any other route. */
const READ_METHODS = new Set(["GET", "HEAD", "DELETE", "OPTIONS"]);

export type Classified =
  | { kind: "operation"; operation: AiOperation }
  | { kind: "passthrough" }
  | { kind: "refused"; status: 404 | 405; detail: string };

/**
 * What a request to an AI route is, by its method and normalised path: one of its format's
 * operations (a POST whose path ends with one, case and a trailing slash aside), a read that
 * passes unmetered, or a refusal naming what the route meters.
 */
export function classify(format: AiFormat, method: string, path: string): Classified {
  if (READ_METHODS.has(method)) return { kind: "passthrough" };
  const lower = path.toLowerCase().replace(/\/+$/, "");
  const operations = OPERATIONS[format];
  const operation = operations.find((o) => lower.endsWith(o.suffix));
  const served = operations.map((o) => `…${o.suffix}`).join(", ");
  if (operation && method === "POST") return { kind: "operation", operation };
  if (operation)
    return {
      kind: "refused",
      status: 405,
      detail: `${method} ${path} is not how this API is asked: send a POST (this ${format} route meters POST ${served})`,
    };
  return {
    kind: "refused",
    status: 404,
    detail: `${method} ${path} is not an endpoint this ${format} route meters (POST ${served}); a body it cannot price is not forwarded: give it a route of its own`,
  };
}
