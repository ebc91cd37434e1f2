// Whose state a limit is by default: the caller's, its tenant's, or its address's. Apart from
// plan.ts and key-by.ts, which both name it, so that neither imports the other.
export type LimitScope = "caller" | "tenant" | "ip";
