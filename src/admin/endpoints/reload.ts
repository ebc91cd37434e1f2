// POST /admin/reload: reads the config file again, as SIGHUP and the file watcher do. A file
// with errors is refused with all of them, and the previous config keeps serving. Either way the
// attempt is audited, its target the config file.
import { formatProblem } from "../../config/problems.js";
import type { ReloadResult } from "../../config/reload-result.js";
import type { AuditLog } from "../../operator-state/audit.js";
import { audited } from "../audited.js";
import { replyProblem, sendJson } from "../reply.js";
import type { AdminHandler } from "../router.js";

export interface ReloadEndpointDeps {
  reload: () => Promise<ReloadResult>;
  /** The config file a reload reads: the audit entry's target. */
  file: () => string;
  audit: Pick<AuditLog, "write">;
}

export function reloadConfig(deps: ReloadEndpointDeps): AdminHandler {
  return async (request) => {
    const result = await deps.reload();
    await audited(deps.audit, request, "POST /admin/reload", deps.file());
    const { res } = request;
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
