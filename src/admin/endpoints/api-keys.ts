// The keys issued at runtime (operator-state/api-keys.ts): POST /admin/keys issues one and shows it once,
// GET /admin/keys?client= lists a client's keys by fingerprint, DELETE /admin/keys/{id} revokes,
// POST /admin/keys/{id}/rotate issues a successor and lets the old key live `grace` longer. Every
// write is audited by the token's name, with the key's id (never the key). A body the API cannot
// use is a 400 bad-key-request naming the fix; a client, plan, tenant or limits that the YAML's
// clients[] could not have is refused with --check's own message.
import type { CompiledClient, Runtime } from "../../config/compile.js";
import { formatDuration, parseDuration } from "../../config/units.js";
import { checkKeySpec } from "../../operator-state/api-key-spec.js";
import {
  fingerprintOf,
  type IssuedKey,
  KEY_CURSOR,
  KEY_ID,
  KeyBeingReplacedError,
  type KeyStore,
  KeyStoreLimitError,
  type StoredKey,
} from "../../operator-state/api-keys.js";
import type { AuditLog } from "../../operator-state/audit.js";
import { audited, keyTarget } from "../audited.js";
import { readJsonObject } from "../json-body.js";
import { ProblemError, replyProblem, sendJson } from "../reply.js";
import type { AdminHandler, AdminRequest } from "../router.js";
import type { FromStore } from "../store-failure.js";

export interface KeyEndpointDeps {
  runtime: () => Runtime;
  keys: () => KeyStore;
  fromStore: FromStore;
  audit: Pick<AuditLog, "write">;
}

const CREATE_MEMBERS = ["client", "plan", "tenant", "expires_in", "limits"] as const;
const ROTATE_MEMBERS = ["grace"] as const;

/** The longest `expires_in` of a key: ten years; a key meant to outlive that takes none. */
export const KEY_EXPIRES_IN_MAX_MS = 3650 * 86_400_000;
/** The longest `grace` of a rotation: a month to move callers; longer is two keys kept, not a grace. */
export const ROTATE_GRACE_MAX_MS = 30 * 86_400_000;

/** A key as listings show it: never the key, its fingerprint instead. */
export function keyView(r: StoredKey): Record<string, unknown> {
  return {
    id: r.id,
    fingerprint: fingerprintOf(r.hash),
    client: r.client,
    plan: r.plan,
    ...(r.tenant === undefined ? {} : { tenant: r.tenant }),
    ...(r.limits === undefined ? {} : { limits: r.limits }),
    created_at: new Date(r.createdAtMs).toISOString(),
    expires_at: r.expiresAtMs === undefined ? null : new Date(r.expiresAtMs).toISOString(),
  };
}

/** What create and rotate answer: the listing's fields, and the key itself (only here). */
function issuedView(issued: IssuedKey, warning: string | undefined): Record<string, unknown> {
  const { id, ...rest } = keyView(issued.record);
  return { id, key: issued.key, ...rest, ...(warning === undefined ? {} : { warning }) };
}

function refuse(detail: string): never {
  throw new ProblemError("bad_key_request", detail);
}

function onlyMembers(body: Record<string, unknown>, allowed: readonly string[]): void {
  for (const name of Object.keys(body))
    if (!allowed.includes(name))
      refuse(`unknown member "${name}": a key request takes ${allowed.map((a) => `"${a}"`).join(", ")}`);
}

function optionalText(body: Record<string, unknown>, name: string): string | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string") refuse(`"${name}" must be a string`);
  return v;
}

/** A duration member (`"30d"`, `"2s"`), in ms, at most `maxMs`; undefined when absent. */
function duration(
  body: Record<string, unknown>,
  name: string,
  zeroAllowed: boolean,
  maxMs: number,
  tooLong: string,
): number | undefined {
  const text = optionalText(body, name);
  if (text === undefined) return undefined;
  const ms = parseDuration(text);
  if (ms === null || (!zeroAllowed && ms <= 0) || !Number.isSafeInteger(Math.floor(ms)))
    refuse(`"${name}" must be a duration such as 250ms, 5s, 15m, 1h or 30d${zeroAllowed ? "" : ", above 0"}`);
  if (ms > maxMs) refuse(`"${name}" must be at most ${formatDuration(maxMs)}: ${tooLong}`);
  return ms;
}

/** The YAML client a key for `client` would serve as, with the warning the API answers. */
function yamlWins(rt: Runtime, client: string): string | undefined {
  let yaml: CompiledClient | undefined;
  for (const c of rt.clientsByKeyHash.values())
    if (c.id === client) {
      yaml = c;
      break;
    }
  if (!yaml) return undefined;
  return `client "${client}" is also in the YAML config, which wins: this key serves as that client, with its plan "${yaml.plan.name}"${yaml.tenant === undefined ? "" : `, tenant "${yaml.tenant}"`} and limits; the plan, tenant and limits stored with the key apply only once that client leaves the config`;
}

function unknownId(res: AdminRequest["res"], id: string): void {
  replyProblem(
    res,
    "unknown_key_id",
    KEY_ID.test(id)
      ? `no key has the id "${id}" (revoked, expired, or never issued); GET /admin/keys?client=<id> lists a client's keys`
      : `"${id}" is not a key id: ids look like key_ followed by 12 letters and digits; GET /admin/keys?client=<id> lists a client's keys`,
  );
}

/** A store limit the operator can fix (too many keys) is a 400; any other failure the store's 503. */
async function writing<T>(fromStore: FromStore, work: () => Promise<T>): Promise<T> {
  let limit: KeyStoreLimitError | undefined;
  const result = await fromStore(() =>
    work().catch((err: unknown) => {
      if (!(err instanceof KeyStoreLimitError)) throw err;
      limit = err;
      return undefined;
    }),
  );
  if (limit || result === undefined) refuse(limit?.message ?? "the key was not issued");
  return result;
}

export function keyEndpoints(deps: KeyEndpointDeps): {
  create: AdminHandler;
  list: AdminHandler;
  revoke: AdminHandler;
  rotate: AdminHandler;
} {
  const { fromStore } = deps;

  async function create(request: AdminRequest): Promise<void> {
    const body = await readJsonObject(request.req, "bad_key_request");
    onlyMembers(body, CREATE_MEMBERS);
    const client = optionalText(body, "client");
    const plan = optionalText(body, "plan");
    if (client === undefined || plan === undefined)
      refuse('give the key\'s "client" (its id in logs and limits) and "plan" (one of the config\'s plans)');
    const tenant = optionalText(body, "tenant");
    const expiresInMs = duration(
      body,
      "expires_in",
      false,
      KEY_EXPIRES_IN_MAX_MS,
      "leave it out for a key that lives until revoked",
    );
    const limits = body.limits ?? undefined;
    const rt = deps.runtime();
    const spec = checkKeySpec(rt.config, { client, plan, tenant, limits });
    if (!spec.ok) refuse(spec.problems.join("; "));
    const issued = await writing(fromStore, () =>
      deps.keys().create({
        client,
        plan,
        tenant,
        expiresInMs,
        limits: limits === undefined ? undefined : (limits as Record<string, unknown>),
      }),
    );
    await audited(
      deps.audit,
      request,
      "POST /admin/keys",
      keyTarget(issued.record.id, {
        client,
        plan,
        tenant,
        limits,
        ...(expiresInMs === undefined ? {} : { expiresIn: formatDuration(expiresInMs) }),
      }),
    );
    sendJson(request.res, 201, issuedView(issued, yamlWins(rt, client)));
  }

  /**
   * `?client=<id>`: that client's keys, as a list. Without it, every client's, a page at a time:
   * `{ keys, next_cursor }` from `?cursor=` (start: none), about `?limit=` (1–1000, default 100)
   * per page, kept to those of `?plan=` and `?tenant=` when given (a page may then hold fewer).
   */
  async function list({ res, query }: AdminRequest): Promise<void> {
    const client = query.get("client");
    if (client !== null) {
      if (client === "") {
        replyProblem(
          res,
          "bad_key_request",
          "client is empty: GET /admin/keys?client=<id>, or no client for every key",
        );
        return;
      }
      const keys = await fromStore(() => deps.keys().list(client));
      sendJson(res, 200, keys.map(keyView));
      return;
    }
    const cursor = query.get("cursor") ?? "0";
    if (!KEY_CURSOR.test(cursor)) {
      replyProblem(
        res,
        "bad_key_request",
        `cursor "${cursor}" is not one a listing gave: pass next_cursor as it came`,
      );
      return;
    }
    const limitText = query.get("limit") ?? "100";
    const limit = Number(limitText);
    if (!/^\d+$/.test(limitText) || limit < 1 || limit > 1000) {
      replyProblem(res, "bad_key_request", `limit "${limitText}" is not a whole number from 1 to 1000`);
      return;
    }
    const plan = query.get("plan");
    const tenant = query.get("tenant");
    const page = await fromStore(() => deps.keys().listAll(cursor, limit));
    const keys = page.keys.filter(
      (k) => (plan === null || k.plan === plan) && (tenant === null || k.tenant === tenant),
    );
    sendJson(res, 200, { keys: keys.map(keyView), next_cursor: page.next });
  }

  async function revoke(request: AdminRequest): Promise<void> {
    const id = request.params.id!;
    const revoked = KEY_ID.test(id) ? await fromStore(() => deps.keys().revoke(id)) : undefined;
    if (!revoked) {
      unknownId(request.res, id);
      return;
    }
    await audited(deps.audit, request, "DELETE /admin/keys", `${id} (client:${revoked.client})`);
    sendJson(request.res, 200, { id, client: revoked.client, revoked: true });
  }

  async function rotate(request: AdminRequest): Promise<void> {
    const id = request.params.id!;
    const body = await readJsonObject(request.req, "bad_key_request");
    onlyMembers(body, ROTATE_MEMBERS);
    const graceMs =
      duration(
        body,
        "grace",
        true,
        ROTATE_GRACE_MAX_MS,
        "a grace is the time callers take to move to the successor; revoke the old key later by hand if they need longer",
      ) ?? 0;
    let replaced: KeyBeingReplacedError | undefined;
    const rotated = KEY_ID.test(id)
      ? await fromStore(() =>
          deps
            .keys()
            .rotate(id, graceMs)
            .catch((err: unknown) => {
              if (!(err instanceof KeyBeingReplacedError)) throw err;
              replaced = err;
              return undefined;
            }),
        )
      : undefined;
    if (replaced) {
      replyProblem(request.res, "key_being_replaced", replaced.message);
      return;
    }
    if (!rotated) {
      unknownId(request.res, id);
      return;
    }
    await audited(
      deps.audit,
      request,
      "POST /admin/keys/rotate",
      `${id} -> ${rotated.issued.record.id} (client:${rotated.previous.client}, grace ${graceMs === 0 ? "0s" : formatDuration(graceMs)})`,
    );
    sendJson(request.res, 201, {
      ...issuedView(rotated.issued, yamlWins(deps.runtime(), rotated.previous.client)),
      previous: {
        id: rotated.previous.id,
        expires_at:
          rotated.previous.expiresAtMs === undefined
            ? null
            : new Date(rotated.previous.expiresAtMs).toISOString(),
      },
    });
  }

  return { create, list, revoke, rotate };
}
