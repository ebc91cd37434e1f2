// cluster-key-slot (a dependency of ioredis too) ships no types: the slot of a key, honouring
// its {hash tag}, as Redis Cluster computes it.
declare module "cluster-key-slot" {
  export default function calculateSlot(key: string | Buffer): number;
}
