// The deployment examples agree with what tollgate actually serves, and commit nothing an attacker
// could guess: the Kubernetes manifests' ports, probe paths, env names, secret keys and config
// mount; the compose file's services, env names and the nginx upstreams; the Dockerfile's
// entrypoint, health check and build context. The ConfigMap's config is loaded and served for
// real, the image's entrypoint and the Secret script are run (with a stand-in node and kubectl).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { healthcheck } from "../../src/admin/healthcheck.js";
import { listenAddress } from "../../src/config/listener-tls.js";
import { loadConfigText } from "../../src/config/load.js";
import { type InProcessGateway, startGateway, writeConfig } from "../support/gateway.js";
import { send } from "../support/http.js";
import { freePort } from "../support/ports.js";

const root = new URL("../../", import.meta.url).pathname;
const read = (path: string) => readFileSync(root + path, "utf8");
const docs = (path: string) => parseAllDocuments(read(path)).map((d) => d.toJS());
const placeholders = (text: string) =>
  [...text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}/g)].map((m) => ({
    name: m[1]!,
    hasDefault: m[2] !== undefined,
  }));
const port = (hostPort: string) => Number(hostPort.split(":").at(-1));
/** A hex SHA-256 written out: a key hash committed to the repository. */
const SHA256_LITERAL = /\b[0-9a-f]{64}\b/i;

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string } };
}

describe("deploy/kubernetes", () => {
  const [configMap] = docs("deploy/kubernetes/configmap.yaml");
  const [deployment] = docs("deploy/kubernetes/deployment.yaml");
  const services = docs("deploy/kubernetes/service.yaml");
  const [hpa] = docs("deploy/kubernetes/hpa.yaml");
  const [policy] = docs("deploy/kubernetes/networkpolicy.yaml");
  const yamlText: string = configMap.data["gateway.yaml"];
  const container = deployment.spec.template.spec.containers[0];
  const envVars: EnvVar[] = container.env;
  const secretRefs = envVars.flatMap((e) => (e.valueFrom?.secretKeyRef ? [e.valueFrom.secretKeyRef] : []));
  // What the Deployment sets: literal values as written, Secret values as create-secrets.sh makes them.
  const env: Record<string, string> = Object.fromEntries(
    envVars.map((e) => [
      e.name,
      e.value ??
        {
          "redis-url": "redis://127.0.0.1:6379",
          "admin-token": "a".repeat(64),
          "acme-prod-key-sha256": "b".repeat(64),
        }[e.valueFrom!.secretKeyRef!.key]!,
    ]),
  );
  const loaded = loadConfigText(yamlText, "configmap/gateway.yaml", env);
  let gw: InProcessGateway | undefined;
  afterAll(async () => {
    await gw?.stop();
  });

  it("the ConfigMap's config is valid with the env the Deployment sets", () => {
    expect(loaded.ok, JSON.stringify(!loaded.ok && loaded.problems)).toBe(true);
  });

  it("every ${VAR} of the config is set by the Deployment, and each Secret key by create-secrets.sh", () => {
    const names = new Set(envVars.map((e) => e.name));
    for (const p of placeholders(yamlText)) if (!p.hasDefault) expect(names, p.name).toContain(p.name);
    for (const name of names) expect(placeholders(yamlText).map((p) => p.name)).toContain(name);
    const script = read("deploy/kubernetes/create-secrets.sh");
    for (const ref of secretRefs) {
      expect(ref.name).toBe("tollgate-secrets");
      expect(script, ref.key).toContain(`"$dir/${ref.key}"`);
    }
  });

  it("commits no secret: no Secret manifest, no key hash, no admin token, no plain key", () => {
    for (const file of readdirSync(`${root}deploy/kubernetes`).filter((f) => f.endsWith(".yaml"))) {
      const text = read(`deploy/kubernetes/${file}`);
      expect(text, file).not.toMatch(SHA256_LITERAL);
      for (const doc of docs(`deploy/kubernetes/${file}`)) expect(doc.kind, file).not.toBe("Secret");
    }
    if (!loaded.ok) throw new Error("config");
    expect(loaded.config.admin.token).toBe(env.TOLLGATE_ADMIN_TOKEN);
    for (const client of loaded.config.clients) {
      expect(client.key, client.id).toBeUndefined();
      expect(client.key_sha256).toBe(env.ACME_PROD_KEY_SHA256);
    }
    for (const e of envVars) {
      if (["REDIS_URL", "TOLLGATE_ADMIN_TOKEN", "ACME_PROD_KEY_SHA256"].includes(e.name))
        expect(e.valueFrom?.secretKeyRef, e.name).toBeDefined();
    }
  });

  it("trusts no proxy range by default, and never the whole 10.0.0.0/8", () => {
    if (!loaded.ok) throw new Error("config");
    expect(yamlText).toContain("trusted_proxies: ${TRUSTED_PROXIES}");
    expect(loaded.config.identity.trusted_proxies).toEqual([]);
    const text = read("deploy/kubernetes/deployment.yaml") + yamlText;
    expect(text).not.toContain("10.0.0.0/8");
    // The Deployment says how to find the ingress controller's addresses.
    expect(read("deploy/kubernetes/deployment.yaml")).toMatch(/kubectl get pods -n ingress-nginx .*-o wide/);
  });

  it("preStop waits with an exec of sleep, which works before Kubernetes 1.30", () => {
    const preStop = container.lifecycle.preStop;
    expect(preStop.sleep).toBeUndefined();
    expect(preStop.exec.command).toEqual(["sleep", "5"]);
    // The image's base has a sleep binary (Debian's coreutils); distroless images do not. Both
    // stages build on it; deploy/make-base-image.sh's stand-in is a Debian too.
    expect(read("Dockerfile")).toMatch(/^ARG NODE_IMAGE=node:\d+-slim$/m);
    expect(read("Dockerfile").match(/^FROM .*/gm)).toEqual([
      "FROM ${NODE_IMAGE} AS build",
      "FROM ${NODE_IMAGE}",
    ]);
    expect(read("deploy/make-base-image.sh")).toContain("debootstrap --variant=minbase");
  });

  it("container ports, probes, services and the NetworkPolicy match the config's listeners", () => {
    if (!loaded.ok) throw new Error("config");
    const ports = Object.fromEntries(
      container.ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort]),
    );
    expect(ports.proxy).toBe(port(listenAddress(loaded.config.listen)));
    expect(ports.admin).toBe(port(loaded.config.admin.listen));
    expect(loaded.config.admin.listen.startsWith("0.0.0.0:")).toBe(true); // probes come from the kubelet
    expect(container.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "admin" });
    expect(container.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "admin" });
    const targetPorts = services.flatMap((s: { spec: { ports: { targetPort: string }[] } }) =>
      s.spec.ports.map((p) => p.targetPort),
    );
    for (const target of targetPorts) expect(Object.keys(ports)).toContain(target);
    expect(hpa.spec.scaleTargetRef.name).toBe(deployment.metadata.name);
    expect(deployment.spec.template.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(
      loaded.config.shutdown_grace,
    );
    expect(policy.kind).toBe("NetworkPolicy");
    expect(policy.spec.podSelector.matchLabels).toEqual(deployment.spec.template.metadata.labels);
    const policyPorts = policy.spec.ingress.flatMap((r: { ports: { port: string }[] }) =>
      r.ports.map((p) => p.port),
    );
    expect(policyPorts.sort()).toEqual(["admin", "proxy"]);
  });

  it("runs as the image's user on a read-only root with no tmpfs, as compose runs it", () => {
    const user = dockerfile().findLast((s) => s.op === "USER")!.args;
    const pod = deployment.spec.template.spec.securityContext;
    expect(user).toBe(`${pod.runAsUser}:${pod.runAsGroup}`);
    expect(pod.runAsNonRoot).toBe(true);
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    expect(container.securityContext.capabilities.drop).toEqual(["ALL"]);
    // The gateway writes no file (deploy/check-image.sh runs the image with /tmp read-only too):
    // the only volume is the config.
    expect(deployment.spec.template.spec.volumes.map((v: { name: string }) => v.name)).toEqual(["config"]);
    const gateway = parse(read("deploy/docker-compose.yaml")).services.gateway;
    expect(gateway.read_only).toBe(true);
    expect(gateway.tmpfs).toBeUndefined();
    expect(gateway.user).toBeUndefined(); // the image's
    expect(gateway.cap_drop).toEqual(["ALL"]);
  });

  it("the config is mounted as a directory (no subPath), so edits reach the pod and hot-reload", () => {
    const configArg = container.args[container.args.indexOf("--config") + 1];
    const mount = container.volumeMounts.find((m: { name: string }) => m.name === "config");
    expect(mount.subPath).toBeUndefined();
    expect(mount.mountPath).toBe(dirname(configArg));
    const volume = deployment.spec.template.spec.volumes.find((v: { name: string }) => v.name === "config");
    expect(volume.configMap.name).toBe(configMap.metadata.name);
    expect(Object.keys(configMap.data)).toContain(configArg.split("/").at(-1));
  });

  it("the probe paths answer on the admin listener of a gateway running that config", async () => {
    const local = yamlText
      .replace("listen: 0.0.0.0:8080", "listen: 127.0.0.1:0")
      .replace("listen: 0.0.0.0:9090", "listen: 127.0.0.1:0");
    gw = await startGateway(local, { ...env, REDIS_URL: "memory://" });
    expect((await send(gw.adminUrl, { path: container.livenessProbe.httpGet.path })).status).toBe(200);
    expect((await send(gw.adminUrl, { path: container.readinessProbe.httpGet.path })).status).toBe(200);
  });

  describe("create-secrets.sh", () => {
    const script = `${root}deploy/kubernetes/create-secrets.sh`;
    /** Runs the script with a kubectl that records the Secret it is given instead of creating it. */
    const run = (env: Record<string, string>, args: string[] = []) => {
      const dir = mkdtempSync(join(tmpdir(), "tollgate-secrets-"));
      mkdirSync(join(dir, "bin"));
      mkdirSync(join(dir, "secret"));
      // `create ... --from-file=DIR`: copy what DIR holds; `apply`: read the manifest and note the args.
      writeFileSync(
        join(dir, "bin/kubectl"),
        `#!/bin/sh
if [ "$1" = create ]; then
  for a in "$@"; do case "$a" in --from-file=*) cp "\${a#--from-file=}"/* "${dir}/secret/";; esac; done
  echo "$*" > "${dir}/create-args"
  echo "kind: Secret"
else
  cat > "${dir}/applied"; echo "$*" > "${dir}/apply-args"
fi
`,
      );
      chmodSync(join(dir, "bin/kubectl"), 0o755);
      const r = spawnSync("sh", [script, ...args], {
        env: { PATH: `${dir}/bin:${process.env.PATH}`, ...env },
        encoding: "utf8",
      });
      const secret = existsSync(join(dir, "secret"))
        ? Object.fromEntries(
            readdirSync(join(dir, "secret")).map((f) => [f, readFileSync(join(dir, "secret", f), "utf8")]),
          )
        : {};
      const file = (name: string) =>
        existsSync(join(dir, name)) ? readFileSync(join(dir, name), "utf8") : "";
      return { ...r, secret, createArgs: file("create-args"), applyArgs: file("apply-args") };
    };

    it("makes every key the Deployment reads, random each time, and prints the client's key once", () => {
      const redisUrl = "redis://:pw@redis.default.svc.cluster.local:6379";
      const first = run({ REDIS_URL: redisUrl }, ["-n", "edge"]);
      expect(first.status, first.stderr).toBe(0);
      expect(Object.keys(first.secret).sort()).toEqual(secretRefs.map((r) => r.key).sort());
      expect(first.secret["redis-url"]).toBe(redisUrl);
      expect(first.secret["admin-token"]).toMatch(/^[0-9a-f]{64}$/);
      const key = /acme-prod[^:]*: ([0-9a-f]{64})$/m.exec(first.stdout)?.[1];
      expect(key, first.stdout).toBeDefined();
      expect(first.secret["acme-prod-key-sha256"]).toBe(createHash("sha256").update(key!).digest("hex"));
      expect(first.stdout).not.toContain(first.secret["admin-token"]);
      expect(first.createArgs).toContain("secret generic tollgate-secrets");
      expect(first.createArgs).toContain("-n edge");
      expect(first.applyArgs).toContain("-n edge");
      const second = run({ REDIS_URL: redisUrl });
      expect(second.secret["admin-token"]).not.toBe(first.secret["admin-token"]);
      expect(second.secret["acme-prod-key-sha256"]).not.toBe(first.secret["acme-prod-key-sha256"]);
    });

    it("refuses to run without REDIS_URL, saying so", () => {
      const r = run({});
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain("REDIS_URL");
      expect(r.createArgs).toBe("");
    });
  });
});

/** The Dockerfile's instructions, continuation lines joined. */
function dockerfile(): { op: string; args: string; stage: number }[] {
  const out: { op: string; args: string; stage: number }[] = [];
  let stage = -1;
  const text = read("Dockerfile").replace(/\\\n/g, " ");
  for (const line of text.split("\n")) {
    const m = /^([A-Z]+)\s+(.*)$/.exec(line.trim());
    if (!m) continue;
    if (m[1] === "FROM") stage++;
    out.push({ op: m[1]!, args: m[2]!, stage });
  }
  return out;
}

describe("Dockerfile", () => {
  const steps = dockerfile();
  const runtime = steps.filter((s) => s.stage === Math.max(...steps.map((x) => x.stage)));
  const envOf = (name: string) =>
    runtime
      .filter((s) => s.op === "ENV")
      .map((s) => new RegExp(`\\b${name}=(\\S+)`).exec(s.args)?.[1])
      .find((v) => v !== undefined);

  it("the image holds no config: the demo's plain keys never ship in it", () => {
    for (const s of runtime.filter((s) => s.op === "COPY"))
      expect(s.args.replaceAll("config/gateway.schema.json", "")).not.toMatch(/\bconfig\b/);
    const config = envOf("TOLLGATE_CONFIG")!;
    expect(config).toBe("/etc/tollgate/gateway.yaml");
    expect(read(".dockerignore").match(/^!config.*/gm)).toEqual(["!config/gateway.schema.json"]);
  });

  it("holds what package.json's files ships, at the same paths, and leaves out what it leaves out", () => {
    const pkg = JSON.parse(read("package.json")) as { files: string[] };
    const copied = runtime
      .filter((s) => s.op === "COPY")
      .map((s) => s.args.replace(/^--from=\S+\s+/, "").split(/\s+/));
    for (const entry of pkg.files.filter((f) => !f.startsWith("!"))) {
      const copy = copied.find(([source]) => source === entry || source === `/app/${entry}`);
      expect(copy, entry).toBeDefined();
      expect([`./${entry}`, `/app/${entry}`], entry).toContain(copy![1]);
    }
    // Left out: removed from the build stage's dist before the runtime copies it.
    const build = steps
      .filter((s) => s.stage === 0 && s.op === "RUN")
      .map((s) => s.args)
      .join(" ");
    const removed = /\brm -f ([^&;]+)/.exec(build)?.[1]?.trim().split(/\s+/) ?? [];
    for (const entry of pkg.files.filter((f) => f.startsWith("!"))) expect(removed).toContain(entry.slice(1));
    // What the gateway reads beside dist/ at run time, found from the modules that read it.
    expect(read("src/admin/console/routes.ts")).toContain('new URL("../../../console/", import.meta.url)');
    expect(read("src/limits/stores/redis/scripts.ts")).toContain(
      'new URL("../../../../lua/", import.meta.url)',
    );
  });

  it("the health check reads the admin port from the config instead of assuming 9090", () => {
    const check = runtime.find((s) => s.op === "HEALTHCHECK")!.args;
    expect(check).not.toMatch(/:\d{2,5}\b/);
    const script = /"(\/app\/dist\/[^"]+\.js)"/.exec(check)?.[1];
    expect(script).toBe("/app/dist/admin/healthcheck.js");
    // Compiled from src/ by `npm run build` (tsconfig.build.json: rootDir src, outDir dist).
    expect(existsSync(`${root}src/admin/healthcheck.ts`)).toBe(true);
  });

  it("every file the build copies is in the build context .dockerignore lets through", () => {
    const allowed = read(".dockerignore")
      .split("\n")
      .filter((l) => l.startsWith("!"))
      .map((l) => l.slice(1));
    expect(read(".dockerignore")).toMatch(/^\*$/m);
    for (const s of steps.filter((s) => s.op === "COPY" && !s.args.includes("--from"))) {
      const sources = s.args.split(/\s+/).slice(0, -1);
      for (const source of sources) expect(allowed, source).toContain(source.replace(/^\.\//, ""));
    }
  });

  describe("docker-entrypoint.sh", () => {
    const entry = runtime.find((s) => s.op === "ENTRYPOINT")!.args;
    /**
     * The script laid out as in the image (/app): beside it a stand-in dist/cli.js that prints its
     * arguments, deploy/demo-keys.mjs, and node_modules. dist/config/env.js is a stand-in too
     * (no build here): `${NAME}` and `${NAME:-default}` only, enough for these configs.
     */
    const image = mkdtempSync(join(tmpdir(), "tollgate-image-"));
    mkdirSync(join(image, "dist/config"), { recursive: true });
    mkdirSync(join(image, "deploy"));
    copyFileSync(`${root}deploy/docker-entrypoint.sh`, join(image, "docker-entrypoint.sh"));
    copyFileSync(`${root}deploy/demo-keys.mjs`, join(image, "deploy/demo-keys.mjs"));
    symlinkSync(`${root}node_modules`, join(image, "node_modules"));
    writeFileSync(join(image, "dist/cli.js"), "console.log(JSON.stringify(process.argv.slice(2)));\n");
    writeFileSync(
      join(image, "dist/config/env.js"),
      "export const substituteEnv = (text, env) => ({ text: text.replace(/\\$\\{(\\w+)(?::-([^}]*))?\\}/g, (_, n, d) => env[n] || d || '') });\n",
    );
    const run = (env: Record<string, string>, args: string[] = []) =>
      spawnSync("sh", [join(image, "docker-entrypoint.sh"), ...args], {
        env: { PATH: process.env.PATH, ...env },
        encoding: "utf8",
      });

    it("is the image's entrypoint", () => {
      expect(entry).toBe('["/bin/sh", "/app/docker-entrypoint.sh"]');
      expect(
        runtime.some(
          (s) => s.op === "COPY" && s.args === "deploy/docker-entrypoint.sh ./docker-entrypoint.sh",
        ),
      ).toBe(true);
    });

    it("without a mounted config, refuses to start and says how to mount one", () => {
      const r = run({ TOLLGATE_CONFIG: "/etc/tollgate/gateway.yaml" });
      expect(r.status).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toContain("no config at /etc/tollgate/gateway.yaml");
      expect(r.stderr).toContain('docker run -v "$PWD/tollgate:/etc/tollgate:ro"');
      expect(run({ TOLLGATE_CONFIG: "/nowhere.yaml" }, ["--check"]).status).toBe(2);
    });

    it("refuses a config whose clients use a key the repository publishes, naming them, never the key", () => {
      const demo = writeConfig(read("config/gateway.yaml"));
      const r = run({ TOLLGATE_CONFIG: demo });
      expect(r.status).toBe(2);
      expect(r.stdout).toBe(""); // the CLI never ran
      expect(r.stderr).toContain(
        `tollgate: refusing to start: in ${demo}, clients demo-free, demo-pro have a demo API key`,
      );
      expect(r.stderr).toContain("TOLLGATE_ALLOW_DEMO_KEYS=1");
      expect(r.stderr).not.toMatch(/demo-(free|pro)-key/);
      // Through ${VAR}, as a hash, in --config: refused too.
      const viaEnv = writeConfig('clients: [{ id: a, key: "${K}" }]\n');
      expect(run({ TOLLGATE_CONFIG: viaEnv, K: "demo-pro-key" }).stderr).toContain("client a has");
      expect(run({ TOLLGATE_CONFIG: viaEnv, K: "a-key-of-my-own" }).status).toBe(0);
      const hashed = writeConfig(
        `clients: [{ id: b, key_sha256: "${createHash("sha256").update("dev-key").digest("hex").toUpperCase()}" }]\n`,
      );
      expect(run({ TOLLGATE_CONFIG: "/nowhere.yaml" }, ["--config", hashed]).status).toBe(2);
      // Allowed for a demo; not looked at by --check, --version or an operator command.
      expect(JSON.parse(run({ TOLLGATE_CONFIG: demo, TOLLGATE_ALLOW_DEMO_KEYS: "1" }).stdout)).toEqual([]);
      expect(run({ TOLLGATE_CONFIG: demo, TOLLGATE_ALLOW_DEMO_KEYS: "yes" }).status).toBe(2);
      expect(JSON.parse(run({ TOLLGATE_CONFIG: demo }, ["--check"]).stdout)).toEqual(["--check"]);
      expect(JSON.parse(run({ TOLLGATE_CONFIG: demo }, ["keys", "list"]).stdout)).toEqual(["keys", "list"]);
      // A config that does not parse is for the gateway to refuse, with its FILE:LINE:COLUMN.
      expect(run({ TOLLGATE_CONFIG: writeConfig("clients: [\n") }).status).toBe(0);
    });

    it("the published keys it refuses are every plain key of config/gateway.yaml and config/examples/", async () => {
      const { PUBLISHED_KEYS } = (await import(`${root}deploy/demo-keys.mjs`)) as {
        PUBLISHED_KEYS: string[];
      };
      const files = [
        "config/gateway.yaml",
        ...readdirSync(`${root}config/examples`).map((f) => `config/examples/${f}`),
      ];
      const keys = new Set<string>();
      for (const file of files.filter((f) => f.endsWith(".yaml"))) {
        const loaded = loadConfigText(read(file), file, {});
        if (!loaded.ok) continue; // an example that needs its env: its defaults are read below
        for (const c of loaded.config.clients) if (c.key) keys.add(c.key);
        for (const m of read(file).matchAll(/\bkey: "?\$\{\w+:-([^}]+)\}/g)) keys.add(m[1]!);
      }
      expect([...keys].sort()).toEqual([...PUBLISHED_KEYS].sort());
    });

    it("with one, runs the CLI with the arguments given; --config, --help and --version pass through", () => {
      const config = writeConfig("listen: 127.0.0.1:0\n");
      expect(JSON.parse(run({ TOLLGATE_CONFIG: config }).stdout)).toEqual([]);
      expect(JSON.parse(run({ TOLLGATE_CONFIG: config }, ["--check"]).stdout)).toEqual(["--check"]);
      const missing = { TOLLGATE_CONFIG: "/nowhere.yaml" };
      expect(JSON.parse(run(missing, ["--config", config]).stdout)).toEqual(["--config", config]);
      expect(JSON.parse(run(missing, ["--version"]).stdout)).toEqual(["--version"]);
    });
  });
});

describe("deploy/check-image.sh and deploy/make-base-image.sh (run by hand: npm run check:image)", () => {
  const scripts = ["deploy/check-image.sh", "deploy/make-base-image.sh", "deploy/podman-env.sh"];

  it("parse as POSIX sh, and are what the package scripts run", () => {
    for (const script of scripts) {
      const r = spawnSync("sh", ["-n", `${root}${script}`], { encoding: "utf8" });
      expect(r.status, `${script}: ${r.stderr}`).toBe(0);
    }
    const pkg = JSON.parse(read("package.json")) as { scripts: Record<string, string> };
    expect(pkg.scripts["check:image"]).toBe("sh deploy/check-image.sh");
    expect(pkg.scripts["image:base"]).toBe("sh deploy/make-base-image.sh");
    // Not in npm test: vitest runs no shell script, and the suite must stay near 5 minutes.
    expect(pkg.scripts.test).toBe("vitest run");
  });

  it("give podman a containers.conf without default ulimits, on runc, unless one is set", () => {
    const dir = mkdtempSync(join(tmpdir(), "tollgate-podman-env-"));
    const r = spawnSync("sh", ["-c", `. ${root}deploy/podman-env.sh && echo "$CONTAINERS_CONF"`], {
      env: { PATH: process.env.PATH, TMPDIR: dir },
      encoding: "utf8",
    });
    const conf = readFileSync(r.stdout.trim(), "utf8");
    expect(conf).toContain("[containers]\ndefault_ulimits = []");
    expect(conf).toContain('runtime = "runc"');
    const kept = spawnSync("sh", ["-c", `. ${root}deploy/podman-env.sh && echo "$CONTAINERS_CONF"`], {
      env: { PATH: process.env.PATH, CONTAINERS_CONF: "/etc/mine.conf" },
      encoding: "utf8",
    });
    expect(kept.stdout.trim()).toBe("/etc/mine.conf");
  });
});

describe("docs/deployment.md: docker run", () => {
  const block = /^# Deploying\n[\s\S]*?```sh\n([\s\S]*?)```/m
    .exec(read("docs/deployment.md"))![1]!
    .replace(/\\\n\s*/g, " ");
  const run = block.split("\n").find((l) => l.startsWith("docker run"))!;

  it("mounts a config of the operator's own where the image looks for it", () => {
    const config = /TOLLGATE_CONFIG=(\S+)/.exec(read("Dockerfile"))![1]!;
    expect(run).toMatch(new RegExp(`-v "[^"]+:${dirname(config)}(:ro)?"`));
    expect(run).not.toMatch(/demo-|config\/gateway\.yaml/);
  });

  it("can be scraped from the host: the admin listener on the container's interfaces, published on loopback", () => {
    expect(run).toContain("-e TOLLGATE_ADMIN_LISTEN=0.0.0.0:9090");
    expect(run).toContain("-p 127.0.0.1:9090:9090");
    expect(run).not.toMatch(/-p 9090:|-p 0\.0\.0\.0:9090/);
    // config/gateway.yaml reads that variable, the image sets the proxy's.
    expect(read("config/gateway.yaml")).toContain("${TOLLGATE_ADMIN_LISTEN:-127.0.0.1:9090}");
    expect(read("config/gateway.yaml")).toContain("${TOLLGATE_LISTEN:-");
    expect(read("Dockerfile")).toContain("TOLLGATE_LISTEN=0.0.0.0:8080");
  });
});

describe("deploy/docker-compose.yaml", () => {
  const compose = parse(read("deploy/docker-compose.yaml"));
  const gatewayYaml = read("config/gateway.yaml");
  const nginx = read("deploy/nginx.conf");
  const gateway = compose.services.gateway;

  it("runs Redis, a demo upstream, two gateway replicas of one image built once, and a load balancer", () => {
    expect(Object.keys(compose.services).sort()).toEqual(["gateway", "lb", "redis", "upstream"]);
    const built = Object.entries(compose.services).filter(([, s]) => (s as { build?: unknown }).build);
    expect(built.map(([name]) => name)).toEqual(["gateway"]);
    expect(gateway.deploy.replicas).toBe(2);
    expect(gateway.container_name).toBeUndefined();
    expect(gateway.ports).toBeUndefined();
  });

  it("mounts the demo config's directory where the image looks for it", () => {
    const config = /TOLLGATE_CONFIG=(\S+)/.exec(read("Dockerfile"))![1]!;
    expect(gateway.volumes).toEqual([`../config:${dirname(config)}:ro`]);
    expect(existsSync(`${root}config/${config.split("/").at(-1)}`)).toBe(true);
  });

  it("publishes the demo's guessable keys on the host's loopback only", () => {
    expect(compose.services.lb.ports).toEqual(["127.0.0.1:8080:80"]);
  });

  it("every env var a gateway gets is one config/gateway.yaml reads, and the config loads with them", () => {
    const env: Record<string, string> = gateway.environment;
    // TOLLGATE_ALLOW_DEMO_KEYS is the entrypoint's (docker-entrypoint.sh), not the config's.
    const used = [...placeholders(gatewayYaml).map((p) => p.name), "TOLLGATE_ALLOW_DEMO_KEYS"];
    for (const name of Object.keys(env)) expect(used, name).toContain(name);
    const loaded = loadConfigText(gatewayYaml, "config/gateway.yaml", env);
    expect(loaded.ok).toBe(true);
    if (!loaded.ok) return;
    expect(port(listenAddress(loaded.config.listen))).toBe(8080);
    expect(loaded.config.store.url).toBe("redis://redis:6379");
    // Hosts the gateway reaches are services of this file.
    expect(Object.keys(compose.services)).toContain(new URL(env.UPSTREAM_URL!).hostname);
    expect(Number(new URL(env.UPSTREAM_URL!).port)).toBe(Number(compose.services.upstream.environment.PORT));
    // The image refuses the demo's published keys unless told that this is a demo.
    expect(env.TOLLGATE_ALLOW_DEMO_KEYS).toBe("1");
    // The health check reads the admin port from the config, like the image's.
    expect(gateway.healthcheck.test).toEqual(["CMD", "node", "/app/dist/admin/healthcheck.js", "/readyz"]);
    expect(compose.services.lb.depends_on.gateway.condition).toBe("service_healthy");
  });

  it("nginx balances over the gateway replicas on their proxy port", () => {
    const servers = [...nginx.matchAll(/server\s+([\w-]+):(\d+);/g)].map((m) => `${m[1]}:${m[2]}`);
    expect(servers).toEqual(["gateway:8080"]);
    expect(nginx).toContain("X-Forwarded-For");
  });
});

describe("the health check (node dist/admin/healthcheck.js)", () => {
  let gw: InProcessGateway | undefined;
  afterAll(async () => {
    await gw?.stop();
  });

  it("asks the admin listener the config names, ${VAR}s substituted, and fails when it does not answer", async () => {
    const adminPort = await freePort();
    const yaml = `
listen: 127.0.0.1:0
admin: { listen: "\${ADMIN_LISTEN:-127.0.0.1:9}" }
log: { level: warn }
store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:9 }
routes: [{ name: default, match: { path: / }, upstream: api }]
`;
    const env = { ADMIN_LISTEN: `127.0.0.1:${adminPort}` };
    gw = await startGateway(yaml, env);
    const file = writeConfig(yaml);
    const why: string[] = [];
    expect(await healthcheck({ TOLLGATE_CONFIG: file, ...env }, "/healthz", (w) => why.push(w))).toBe(0);
    expect(await healthcheck({ TOLLGATE_CONFIG: file, ...env }, "/readyz", (w) => why.push(w))).toBe(0);
    expect(why).toEqual([]);
    // Another port: nothing listens there.
    const elsewhere = { ADMIN_LISTEN: `127.0.0.1:${await freePort()}` };
    expect(await healthcheck({ TOLLGATE_CONFIG: file, ...elsewhere }, "/healthz", (w) => why.push(w))).toBe(
      1,
    );
    expect(why[0]).toContain(elsewhere.ADMIN_LISTEN);
    expect(await healthcheck({ TOLLGATE_CONFIG: "/nowhere.yaml" }, "/healthz", (w) => why.push(w))).toBe(1);
  });
});
