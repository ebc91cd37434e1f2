// An AI route's settings as the request path reads them (config/compile.ts builds them from
// `routes[].ai`, with their defaults).

/** The API an AI route's upstream speaks. */
export type AiFormat = "openai" | "anthropic" | "responses";

export interface AiSettings {
  format: AiFormat;
  /** Output ceiling per completion when a request names none, and the most it may name. */
  maxOutput: number | undefined;
  clamp: boolean;
  minOutput: number;
  /** Format openai, chat completions: the field a ceiling is written in when a request names none. */
  outputField: "max_tokens" | "max_completion_tokens";
  /** Tokens reserved per image a request attaches (their bytes are not text). */
  imageTokens: number;
  /** Tokens reserved for input a request only refers to (a previous response, a stored conversation). */
  referencedInputTokens: number;
}
