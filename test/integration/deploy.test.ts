// The deployment examples agree with what tollgate actually serves: the Kubernetes manifests'
// ports, probe paths, env names, secret keys and config mount; the compose file's services,
// env names and the nginx upstreams. The ConfigMap's config is loaded and served for real.
import { readFileSync } from "node:fs";
import { dirname } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { loadConfigText } from "../../src/config/load.js";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";

const root = new URL("../../", import.meta.url).pathname;
const read = (path: string) => readFileSync(root + path, "utf8");
const docs = (path: string) => parseAllDocuments(read(path)).map((d) => d.toJS());
const placeholders = (text: string) =>
  [...text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}/g)].map((m) => ({
    name: m[1]!,
    hasDefault: m[2] !== undefined,
  }));
const port = (hostPort: string) => Number(hostPort.split(":").at(-1));

describe("deploy/kubernetes", () => {
  const [configMap] = docs("deploy/kubernetes/configmap.yaml");
  const [secret] = docs("deploy/kubernetes/secret.yaml");
  const [deployment] = docs("deploy/kubernetes/deployment.yaml");
  const services = docs("deploy/kubernetes/service.yaml");
  const [hpa] = docs("deploy/kubernetes/hpa.yaml");
  const yamlText: string = configMap.data["gateway.yaml"];
  const container = deployment.spec.template.spec.containers[0];
  const env = Object.fromEntries(
    container.env.map((e: { name: string }) => [e.name, "redis://127.0.0.1:6379"]),
  );
  const loaded = loadConfigText(yamlText, "configmap/gateway.yaml", env);
  let gw: InProcessGateway | undefined;
  afterAll(async () => {
    await gw?.stop();
  });

  it("the ConfigMap's config is valid with the env the Deployment sets", () => {
    expect(loaded.ok, JSON.stringify(!loaded.ok && loaded.problems)).toBe(true);
  });

  it("every ${VAR} of the config is set by the Deployment, from keys the Secret has", () => {
    const names = new Set(container.env.map((e: { name: string }) => e.name));
    for (const p of placeholders(yamlText)) if (!p.hasDefault) expect(names, p.name).toContain(p.name);
    for (const name of names) expect(placeholders(yamlText).map((p) => p.name)).toContain(name);
    for (const e of container.env) {
      const ref = e.valueFrom?.secretKeyRef;
      if (!ref) continue;
      expect(ref.name).toBe(secret.metadata.name);
      expect(Object.keys(secret.stringData)).toContain(ref.key);
    }
  });

  it("container ports, probes and services match the config's listeners", () => {
    if (!loaded.ok) throw new Error("config");
    const ports = Object.fromEntries(
      container.ports.map((p: { name: string; containerPort: number }) => [p.name, p.containerPort]),
    );
    expect(ports.proxy).toBe(port(loaded.config.listen));
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
    gw = await startGateway(local, { REDIS_URL: "memory://", TOLLGATE_ADMIN_TOKEN: "t" });
    expect((await send(gw.adminUrl, { path: container.livenessProbe.httpGet.path })).status).toBe(200);
    expect((await send(gw.adminUrl, { path: container.readinessProbe.httpGet.path })).status).toBe(200);
  });
});

describe("deploy/docker-compose.yaml", () => {
  const compose = parse(read("deploy/docker-compose.yaml"));
  const gatewayYaml = read("config/gateway.yaml");
  const nginx = read("deploy/nginx.conf");

  it("runs Redis, a demo upstream, two gateways and a load balancer", () => {
    expect(Object.keys(compose.services).sort()).toEqual([
      "gateway-a",
      "gateway-b",
      "lb",
      "redis",
      "upstream",
    ]);
    expect(compose.services["gateway-b"].environment).toEqual(compose.services["gateway-a"].environment);
  });

  it("every env var a gateway gets is one config/gateway.yaml reads, and the config loads with them", () => {
    const env: Record<string, string> = compose.services["gateway-a"].environment;
    const used = placeholders(gatewayYaml).map((p) => p.name);
    for (const name of Object.keys(env)) expect(used, name).toContain(name);
    const loaded = loadConfigText(gatewayYaml, "config/gateway.yaml", env);
    expect(loaded.ok).toBe(true);
    if (!loaded.ok) return;
    expect(port(loaded.config.listen)).toBe(8080);
    expect(loaded.config.store.url).toBe("redis://redis:6379");
    // Hosts the gateway reaches are services of this file.
    expect(Object.keys(compose.services)).toContain(new URL(env.UPSTREAM_URL!).hostname);
    expect(Number(new URL(env.UPSTREAM_URL!).port)).toBe(Number(compose.services.upstream.environment.PORT));
    expect(compose.services["gateway-a"].healthcheck.test.join(" ")).toContain(
      `127.0.0.1:${port(loaded.config.admin.listen)}/readyz`,
    );
  });

  it("nginx balances over both gateways on their proxy port", () => {
    const servers = [...nginx.matchAll(/server\s+([\w-]+):(\d+);/g)].map((m) => `${m[1]}:${m[2]}`);
    expect(servers).toEqual(["gateway-a:8080", "gateway-b:8080"]);
    expect(nginx).toContain("X-Forwarded-For");
  });
});
