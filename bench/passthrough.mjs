// The baseline: a bare reverse proxy on undici with no limits, no identity, no logging. It
// streams with the same dispatch API tollgate uses, so the ratio measures tollgate's own cost.
import { serveBareProxy } from "./bare-proxy.mjs";

serveBareProxy(Number(process.argv[2]), process.argv[3]);
