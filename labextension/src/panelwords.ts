/**
 * The side panel's words for a pool and a server, as the spawn form says them: the user's quota
 * in a pool, the pool's state for the user, a server's state. Pure (no JupyterLab import), so
 * that they are tested in node. It reads the model's answer types only (`model.ts` does not
 * import it back).
 */

import type { IPool, IServer } from './model';

/** The user's quota in a pool, in the spawn form's words. */
export function quotaWords(pool: IPool): string {
  const quota = pool.quota;
  if (!quota || !quota.managed) {
    return 'no quota';
  }
  const within = quota.within_quota || 0;
  const available = quota.available || 0;
  if (available > within) {
    return `${within} within quota, ${available} with borrowing`;
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
  if (!pool.gpu_total) {
    return 'CPU only';
  }
  if (!pool.gpu_available || pool.largest_free_block === 0) {
    return 'full';
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
