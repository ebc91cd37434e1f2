// What a reload answers (the admin API's POST /admin/reload, the log line): the version now
// serving and the restart-only settings held back, or the file's problems. The gateway decides
// it (gateway/reload-decision.ts); the admin API reports it without importing the gateway.
import type { ConfigProblem } from "./problems.js";

export type ReloadTrigger = "watch" | "signal" | "admin";

export type ReloadResult =
  | { ok: true; version: string; changed: boolean; restartRequired: string[] }
  | { ok: false; problems: ConfigProblem[] };
