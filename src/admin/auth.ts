// The operator API's credential: `admin.token` as a bearer token. Until a token is configured
// `/admin/*` answers 404, so an unconfigured gateway exposes nothing there.
import { createHash, timingSafeEqual } from "node:crypto";
import { replyProblem } from "./reply.js";
import type { Guard } from "./router.js";

/**
 * Whether `authorization` carries the admin token. Both sides are hashed first so the
 * comparison takes the same time whatever the presented token's length or content.
 */
export function adminAuthorized(authorization: string | undefined, token: string): boolean {
  const presented = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? "")?.[1] ?? "";
  const a = createHash("sha256").update(presented).digest();
  const b = createHash("sha256").update(token).digest();
  return timingSafeEqual(a, b) && presented.length > 0;
}

/**
 * The guard of every operator path: 404 admin-disabled unless `token()` (the live config's
 * admin.token, read per request so a reload can set or change it) is set, then 401 unless the
 * request presents it.
 */
export function requireAdminToken(token: () => string): Guard {
  return (req, res) => {
    const expected = token();
    if (expected === "") {
      replyProblem(res, "admin_disabled", "the admin API is disabled: set admin.token to enable it");
      return false;
    }
    if (!adminAuthorized(req.headers.authorization, expected)) {
      replyProblem(res, "unauthorized", "send Authorization: Bearer <admin.token>", undefined, {
        "www-authenticate": 'Bearer realm="tollgate-admin"',
      });
      return false;
    }
    return true;
  };
}
