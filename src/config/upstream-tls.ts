// TLS to https:// upstream targets (`upstreams.<name>.ca_file`, `cert_file`/`key_file`,
// `servername`, `insecure`): the files are read relative to the config file and checked when the
// config is loaded, so `--check`, start-up and every reload refuse a file that cannot be used,
// at the key that names it, instead of every request to the upstream failing later.

import { createHash, createPrivateKey, X509Certificate } from "node:crypto";
import { dirname, resolve } from "node:path";
import { createSecureContext } from "node:tls";
import type { UpstreamTls } from "../model/tls.js";
import { readText } from "./read-file.js";
import type { Config } from "./schema.js";

export type { UpstreamTls };

export type UpstreamTlsKey = "ca_file" | "cert_file" | "key_file";

export type UpstreamTlsLoad =
  | { ok: true; tls: Record<string, UpstreamTls> }
  | { ok: false; upstream: string; key: UpstreamTlsKey; message: string };

/** Reads and checks every upstream's TLS files of a validated config; `file` is the config's path. */
export function loadUpstreamTls(config: Config, file: string): UpstreamTlsLoad {
  const out: Record<string, UpstreamTls> = {};
  for (const [name, upstream] of Object.entries(config.upstreams)) {
    if (typeof upstream === "string") continue;
    const { ca_file, cert_file, key_file, servername, insecure } = upstream;
    if (ca_file === undefined && cert_file === undefined && servername === undefined && !insecure) continue;
    const tls: UpstreamTls = { rejectUnauthorized: !insecure, hash: "" };
    const hash = createHash("sha256");
    if (ca_file !== undefined) {
      const path = resolve(dirname(file), ca_file);
      const ca = readText(path);
      if (!ca.ok) return { ok: false, upstream: name, key: "ca_file", message: ca.message };
      try {
        new X509Certificate(ca.text);
      } catch {
        return {
          ok: false,
          upstream: name,
          key: "ca_file",
          message: `${path} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)`,
        };
      }
      tls.ca = ca.text;
      hash.update("ca\0").update(ca.text);
    }
    if (cert_file !== undefined && key_file !== undefined) {
      const certPath = resolve(dirname(file), cert_file);
      const keyPath = resolve(dirname(file), key_file);
      const cert = readText(certPath);
      if (!cert.ok) return { ok: false, upstream: name, key: "cert_file", message: cert.message };
      const key = readText(keyPath);
      if (!key.ok) return { ok: false, upstream: name, key: "key_file", message: key.message };
      let certificate: X509Certificate;
      try {
        certificate = new X509Certificate(cert.text);
      } catch {
        return {
          ok: false,
          upstream: name,
          key: "cert_file",
          message: `${certPath} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)`,
        };
      }
      let privateKey: ReturnType<typeof createPrivateKey>;
      try {
        privateKey = createPrivateKey(key.text);
      } catch {
        return {
          ok: false,
          upstream: name,
          key: "key_file",
          message: `${keyPath} holds no unencrypted PEM private key (expected -----BEGIN PRIVATE KEY-----)`,
        };
      }
      if (!certificate.checkPrivateKey(privateKey))
        return {
          ok: false,
          upstream: name,
          key: "key_file",
          message: `the key in ${keyPath} does not belong to the first certificate of ${certPath}`,
        };
      tls.cert = cert.text;
      tls.key = key.text;
      hash.update("\0cert\0").update(cert.text).update("\0key\0").update(key.text);
    }
    // What the connections will be made with: anything OpenSSL still refuses is refused here.
    try {
      createSecureContext({ ca: tls.ca, cert: tls.cert, key: tls.key });
    } catch (err) {
      return {
        ok: false,
        upstream: name,
        key: tls.cert === undefined ? "ca_file" : "cert_file",
        message: `cannot be used for TLS: ${(err as Error).message}`,
      };
    }
    if (servername !== undefined) tls.servername = servername;
    tls.hash = hash.digest("hex");
    out[name] = tls;
  }
  return { ok: true, tls: out };
}

/** The options Node's TLS connect takes (undici's `connect` and node:https alike). */
export function tlsConnectOptions(tls: UpstreamTls | undefined): {
  ca?: string;
  cert?: string;
  key?: string;
  servername?: string;
  rejectUnauthorized?: boolean;
} {
  if (!tls) return {};
  const { hash: _, ...options } = tls;
  return options;
}
