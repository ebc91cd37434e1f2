// The proxy listener's certificate and key (`listen.tls`): read relative to the config file and
// checked against each other when the config is loaded, so `--check`, start-up and every reload
// refuse a pair that cannot serve, at the key that names it. A reload that is refused leaves the
// running listener with the pair it has (gateway/tls.ts applies only a pair that passed here).

import { createPrivateKey, type KeyObject, X509Certificate } from "node:crypto";
import { dirname, resolve } from "node:path";
import { createSecureContext } from "node:tls";
import type { ListenerTls } from "../model/tls.js";
import { readText } from "./read-file.js";
import type { Config } from "./schema.js";

export type { ListenerTls };

export type TlsFileKey = "cert_file" | "key_file";

export type ListenerTlsLoad =
  | { ok: true; tls: ListenerTls | undefined; warnings: { key: TlsFileKey; message: string }[] }
  | { ok: false; key: TlsFileKey; message: string };

/** Reads and checks `listen.tls` of a validated config; `file` is the config's own path. */
export function loadListenerTls(config: Config, file: string, now = Date.now()): ListenerTlsLoad {
  const listen = config.listen;
  if (typeof listen === "string" || listen.tls === undefined)
    return { ok: true, tls: undefined, warnings: [] };
  const certFile = resolve(dirname(file), listen.tls.cert_file);
  const keyFile = resolve(dirname(file), listen.tls.key_file);
  const cert = readText(certFile);
  if (!cert.ok) return { ok: false, key: "cert_file", message: cert.message };
  const key = readText(keyFile);
  if (!key.ok) return { ok: false, key: "key_file", message: key.message };

  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(cert.text);
  } catch {
    return {
      ok: false,
      key: "cert_file",
      message: `${certFile} holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)`,
    };
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(key.text);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return {
      ok: false,
      key: "key_file",
      message:
        code === "ERR_MISSING_PASSPHRASE" || ENCRYPTED_PEM.test(key.text)
          ? `${keyFile} is encrypted; give the key without a passphrase (openssl pkey -in it -out plain.pem)`
          : `${keyFile} holds no PEM private key (expected -----BEGIN PRIVATE KEY-----)`,
    };
  }
  if (!certificate.checkPrivateKey(privateKey)) {
    return {
      ok: false,
      key: "key_file",
      message: `the key in ${keyFile} does not belong to the first certificate of ${certFile} (the server's certificate must come first, then its chain)`,
    };
  }
  // What the server will do with them: anything OpenSSL still refuses is refused here, not when
  // the listener starts or swaps its context.
  try {
    createSecureContext({ cert: cert.text, key: key.text });
  } catch (err) {
    return {
      ok: false,
      key: "cert_file",
      message: `the certificate cannot be served: ${(err as Error).message}`,
    };
  }

  const warnings: { key: TlsFileKey; message: string }[] = [];
  const notAfter = Date.parse(certificate.validTo);
  if (notAfter < now) {
    warnings.push({
      key: "cert_file",
      message: `the certificate in ${certFile} expired on ${certificate.validTo}`,
    });
  } else if (Date.parse(certificate.validFrom) > now) {
    warnings.push({
      key: "cert_file",
      message: `the certificate in ${certFile} is not valid before ${certificate.validFrom}`,
    });
  }
  return {
    ok: true,
    tls: {
      certFile,
      keyFile,
      cert: cert.text,
      key: key.text,
      fingerprint: certificate.fingerprint256,
      notAfter: new Date(notAfter).toISOString(),
    },
    warnings,
  };
}

/** PKCS#8 (`ENCRYPTED PRIVATE KEY`) or traditional OpenSSL (`Proc-Type: 4,ENCRYPTED`) encryption. */
const ENCRYPTED_PEM = /-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/;

/** The address of `listen`, written either way. */
export function listenAddress(listen: Config["listen"]): string {
  return typeof listen === "string" ? listen : listen.address;
}
