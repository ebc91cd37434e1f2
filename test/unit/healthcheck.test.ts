// The container health probe reads the admin port from the config (src/admin/healthcheck.ts).
import { describe, expect, it } from "vitest";
import { adminListenOf, DEFAULT_ADMIN_LISTEN, probeUrl } from "../../src/admin/healthcheck.js";

describe("adminListenOf", () => {
  it("reads admin.listen after ${VAR} substitution, and the default when the config has none", () => {
    const text = "admin:\n  listen: ${TOLLGATE_ADMIN_LISTEN:-127.0.0.1:9090}\n";
    expect(adminListenOf(text, {})).toBe("127.0.0.1:9090");
    expect(adminListenOf(text, { TOLLGATE_ADMIN_LISTEN: "0.0.0.0:9191" })).toBe("0.0.0.0:9191");
    expect(adminListenOf("admin: { listen: '[::]:9300', token: x }\n", {})).toBe("[::]:9300");
    expect(adminListenOf("listen: 0.0.0.0:8080\n", {})).toBe(DEFAULT_ADMIN_LISTEN);
  });
});

describe("probeUrl", () => {
  it("asks a wildcard listener on loopback, any other address as it is", () => {
    expect(probeUrl("0.0.0.0:9191", "/healthz")).toBe("http://127.0.0.1:9191/healthz");
    expect(probeUrl("[::]:9300", "/readyz")).toBe("http://[::1]:9300/readyz");
    expect(probeUrl("127.0.0.1:9090", "/healthz")).toBe("http://127.0.0.1:9090/healthz");
    expect(probeUrl("10.2.3.4:9090", "/healthz")).toBe("http://10.2.3.4:9090/healthz");
    expect(probeUrl("[fd00::5]:9090", "/healthz")).toBe("http://[fd00::5]:9090/healthz");
    expect(probeUrl(":9090", "/healthz")).toBe("http://127.0.0.1:9090/healthz");
  });
});
