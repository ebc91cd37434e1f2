// `npm run bench:jwks`: a flood of JWTs with random `kid`s against a gateway whose keys come from
// an identity provider (identity.jwt.issuer, OIDC discovery over HTTPS with a CA of its own), and
// how many JWKS fetches it cost the IdP: the refetch gate allows one per refetch_interval,
// whatever the flood's size. Then the same IdP rotates its key and a token of the new key is
// sent: accepted at once (its kid's miss may fetch, once the interval has passed).
//
// One gateway process (built dist/), the IdP in this process; loopback only.
//   REQUESTS (10000)  CONNECTIONS (32)  INTERVAL (2s: refetch_interval)
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { createServer } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportJWK, SignJWT } from "jose";
import { freePort, killAll, root, selfSignedCert, start, startUpstream } from "./support.mjs";

const REQUESTS = Number(process.env.REQUESTS ?? 10_000);
const CONNECTIONS = Number(process.env.CONNECTIONS ?? 32);
const INTERVAL = process.env.INTERVAL ?? "2s";

const dir = mkdtempSync(join(tmpdir(), "tollgate-bench-jwks-"));
// Its own CA: the certificate is self-signed, and the gateway trusts it through ca_file.
const tls = selfSignedCert(dir);

async function key(kid) {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig" } };
}

let keys = [await key("k1")];
let jwksFetches = 0;
const idp = createServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, (req, res) => {
  if (req.url === "/.well-known/openid-configuration") {
    res.writeHead(200, { "content-type": "application/json" });
    return res.end(JSON.stringify({ issuer, jwks_uri: `${issuer}/jwks` }));
  }
  jwksFetches++;
  res.writeHead(200, { "content-type": "application/json", "cache-control": "max-age=3600" });
  res.end(JSON.stringify({ keys: keys.map((k) => k.jwk) }));
});
await new Promise((r) => idp.listen(0, "127.0.0.1", r));
const issuer = `https://127.0.0.1:${idp.address().port}`;

const sign = (k, kid = k.kid) =>
  new SignJWT({ sub: "bench", iss: issuer, aud: "api" })
    .setProtectedHeader({ alg: "ES256", kid })
    .setExpirationTime("10m")
    .sign(k.privateKey);

function get(port, token, agent) {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path: "/", agent, headers: { authorization: `Bearer ${token}` } },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

try {
  const upstream = await startUpstream();
  const port = await freePort();
  const config = join(dir, "gateway.yaml");
  writeFileSync(
    config,
    `listen: 127.0.0.1:${port}
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: "memory://" }
upstreams: { api: ${upstream} }
identity:
  auth_failures: false
  jwt: { issuer: "${issuer}", audience: api, default_plan: free, ca_file: ${tls.cert}, refetch_interval: ${INTERVAL} }
plans:
  free: { global: { rate: 100000/s, burst: 100000 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`,
  );
  await start("gateway", process.execPath, [join(root, "dist/cli.js"), "--config", config], (l) =>
    l.includes("tollgate listening"),
  );
  const fetchedAtStart = jwksFetches;
  const [, body, signature] = (await sign(keys[0])).split(".");
  const forged = () =>
    `${Buffer.from(JSON.stringify({ alg: "ES256", kid: randomBytes(8).toString("hex") })).toString("base64url")}.${body}.${signature}`;
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const statuses = {};
  let sent = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (sent < REQUESTS) {
        sent++;
        const status = await get(port, forged(), agent);
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const during = jwksFetches - fetchedAtStart;
  console.log(
    `${REQUESTS} requests with random kids in ${seconds.toFixed(1)} s (${Math.round(REQUESTS / seconds)}/s, ${CONNECTIONS} connections): statuses ${JSON.stringify(statuses)}`,
  );
  console.log(
    `JWKS fetches during the flood: ${during} (refetch_interval ${INTERVAL}: at most ${Math.ceil(seconds / Number.parseFloat(INTERVAL))} allowed)`,
  );
  await new Promise((r) => setTimeout(r, Number.parseFloat(INTERVAL) * 1000));
  keys = [await key("k2"), ...keys];
  const rotated = await get(port, await sign(keys[0]), agent);
  console.log(
    `a token of a key rotated in after the flood: ${rotated} (JWKS fetches in all: ${jwksFetches})`,
  );
  agent.destroy();
} finally {
  killAll();
  idp.close();
}
