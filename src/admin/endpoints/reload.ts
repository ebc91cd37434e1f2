// POST /admin/reload: reads the config file again, as SIGHUP and the file watcher do. A file
// with errors is refused with all of them, and the previous config keeps serving.
import { formatProblem } from "../../config/problems.js";
import type { ReloadResult } from "../../gateway/reload-decision.js";
import { replyProblem, sendJson } from "../reply.js";
import type { AdminHandler } from "../router.js";

export function reloadConfig(reload: () => Promise<ReloadResult>): AdminHandler {
  return async ({ res }) => {
    const result = await reload();
    if (result.ok) {
      sendJson(res, 200, {
        status: "reloaded",
        version: result.version,
        changed: result.changed,
        restart_required: result.restartRequired,
      });
    } else {
      replyProblem(res, "config_refused", "the config file was refused; the previous config keeps serving", {
        errors: result.problems.map(formatProblem),
      });
    }
  };
}
