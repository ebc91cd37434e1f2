// GET /admin/config: the live config as describe-config.ts writes it.
import type { Runtime } from "../../config/compile.js";
import { describeConfig } from "../describe-config.js";
import { sendJson } from "../reply.js";
import type { AdminHandler } from "../router.js";

export function showConfig(runtime: () => Runtime): AdminHandler {
  return ({ res }) => sendJson(res, 200, describeConfig(runtime()));
}
