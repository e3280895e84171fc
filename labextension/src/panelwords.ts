/**
 * The side panel's words for a pool and a server, as the spawn form says them: the user's quota
 * in a pool, the pool's state for the user, a server's state. Pure (no JupyterLab import), so
 * that they are tested in node. It reads the model's answer types only (`model.ts` does not
 * import it back).
 */

import type { IPool, IServer } from './model';

/** A count of GPU-equivalents as every surface writes it: `16`, `16.86`, `0.14` (two
 * decimals at most: jupyter_gpupool/core/words/gpu_counts.py's `count_text`). */
export function countText(value: number | null | undefined): string {
  if (value === null || value === undefined) {
    return '0';
  }
  if (Number.isInteger(value)) {
    return String(value);
  }
  return value.toFixed(2).replace(/0+$/, '').replace(/\.$/, '');
}

/** Whole GPUs of the pool (its `whole_gpus`; `gpu_total` from an older service). */
function wholeTotal(pool: IPool): number {
  return pool.whole_gpus ? pool.whole_gpus.total : pool.gpu_total;
}

/** What can be admitted now, in GPU-equivalents: each shape's free units times what one
 * counts; the whole GPUs available where the pool lists no shapes (as `PoolChoice`). */
export function freeEquivalents(pool: IPool): number {
  if (!pool.shapes || !pool.shapes.length) {
    return pool.gpu_available;
  }
  return pool.shapes.reduce((sum, s) => sum + s.free * s.equivalent_gpus, 0);
}

/** `16.86 of 17 free`: GPU-equivalents, as the pools page counts them. */
export function freeWords(pool: IPool): string {
  return `${countText(freeEquivalents(pool))} of ${countText(pool.gpu_total)} free`;
}

/** The user's quota in a pool, in the spawn form's words. */
export function quotaWords(pool: IPool): string {
  const quota = pool.quota;
  if (!quota || !quota.managed) {
    return 'no quota';
  }
  const within = quota.within_quota || 0;
  const available = quota.available || 0;
  const exact = quota.within_equivalents;
  // a slice in use: 3 whole GPUs fit a guarantee of 4, and 3.86 GPU-equivalents do
  const sliced = exact !== null && exact !== undefined && exact > within;
  if (available > within) {
    const head = sliced ? `${countText(exact)} (${within} whole)` : String(within);
    return `${head} within quota, ${available} with borrowing`;
  }
  if (sliced) {
    return `${countText(exact)} GPUs (${within} whole) within quota`;
  }
  return `${within} GPU${within === 1 ? '' : 's'} within quota`;
}

/** The pool's state for this user, in the spawn form's words. */
export function poolState(pool: IPool): string {
  if (pool.node_count === 0) {
    return 'no nodes';
  }
  if (pool.status === 'unavailable' || pool.schedulable_nodes === 0) {
    return 'nodes not ready';
  }
  const parts = (pool.shapes || []).filter(s => s.kind !== 'whole');
  if (!wholeTotal(pool) && parts.length) {
    // all its GPUs cut in parts: their free units say
    return parts.some(s => s.free > 0) ? 'free' : 'full';
  }
  if (!wholeTotal(pool)) {
    return 'CPU only';
  }
  if (!pool.gpu_available || pool.largest_free_block === 0) {
    // others already wait in line for it: said, as on the spawn form
    return pool.waiting ? `full, ${pool.waiting} waiting in line` : 'full';
  }
  const quota = pool.quota;
  if (quota && quota.managed && !quota.available) {
    return 'your quota is used up';
  }
  if (quota && quota.managed && !quota.within_quota && quota.borrowing) {
    return 'borrowing possible (may be reclaimed)';
  }
  return 'free';
}

/** A server's state in the side panel: `running`, `running, over quota`, `spawn`... */
export function serverState(server: IServer): string {
  const state = server.state || (server.ready ? 'running' : server.pending || '');
  return server.over_quota ? `${state}${state ? ', ' : ''}over quota` : state;
}

/** What a server has, in the service's words (`MIG 1g.10gb of an A100-80G`, `2× A100-80G`,
 * `no GPU`); its GPU count from a service without them; `—` when unknown. */
export function serverGPUs(server: IServer): string {
  if (server.shape_text) {
    return server.shape_text;
  }
  return server.gpus === null || server.gpus === undefined ? '—' : String(server.gpus);
}
