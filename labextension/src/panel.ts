/**
 * The side panel: this server, pool availability (free GPUs, the user's quota, the pool's
 * state) and the user's servers. The model asks for pools and servers only while it is shown.
 */

import { Widget } from '@lumino/widgets';

import { GPUPoolModel, IPool, IServer, poolState, quotaWords } from './model';

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text?: string,
  className?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (text !== undefined) {
    node.textContent = text;
  }
  if (className) {
    node.className = className;
  }
  return node;
}

function table(header: string[], rows: (string | Node)[][]): HTMLTableElement {
  const t = element('table');
  const head = t.createTHead().insertRow();
  for (const h of header) {
    head.appendChild(element('th', h));
  }
  const body = t.createTBody();
  for (const row of rows) {
    const tr = body.insertRow();
    for (const cell of row) {
      const td = tr.insertCell();
      td.append(cell);
    }
  }
  return t;
}

function bar(pool: IPool): HTMLProgressElement {
  const node = element('progress', undefined, 'jp-gpupool-bar');
  node.max = Math.max(pool.gpu_total, 1);
  node.value = pool.gpu_total - pool.gpu_available;
  return node;
}

function serverLink(server: IServer): Node {
  const name = server.name || '(default)';
  if (server.url && server.ready && !server.this) {
    const a = element('a', name);
    a.href = server.url;
    a.target = '_blank';
    return a;
  }
  return document.createTextNode(server.this ? `${name} (this one)` : name);
}

export class GPUPoolPanel extends Widget {
  constructor(model: GPUPoolModel) {
    super();
    this._model = model;
    this.id = 'jp-gpupool-panel';
    this.addClass('jp-gpupool-panel');
    this.title.caption = 'GPU pools';
    this.title.label = 'GPU pools';
    this.title.closable = true;
    model.changed.connect(this._render, this);
    this._render();
  }

  dispose(): void {
    this._model.changed.disconnect(this._render, this);
    this._model.panelOpen = false;
    super.dispose();
  }

  protected onAfterShow(): void {
    this._model.panelOpen = true;
  }

  protected onAfterHide(): void {
    this._model.panelOpen = false;
  }

  protected onCloseRequest(msg: any): void {
    this._model.panelOpen = false;
    super.onCloseRequest(msg);
  }

  private _render(): void {
    const model = this._model;
    const node = this.node;
    node.replaceChildren();
    node.appendChild(element('h3', 'This server'));
    const here = element('p', model.label, 'jp-gpupool-here');
    node.appendChild(here);
    if (model.warning) {
      node.appendChild(
        element(
          'p',
          'Over quota: this server borrows idle GPUs and may be stopped (reclaimed) when their owners need them back.',
          'jp-gpupool-warning-text'
        )
      );
    }
    if (model.error) {
      node.appendChild(element('p', `Last update failed: ${model.error}`, 'jp-gpupool-error'));
    }
    node.appendChild(element('h3', 'Pools'));
    node.appendChild(
      table(
        ['pool', 'in use', 'free / total', 'your quota', 'state'],
        model.pools.map(p => [
          p.name,
          bar(p),
          `${p.gpu_available} / ${p.gpu_total}`,
          quotaWords(p),
          poolState(p)
        ])
      )
    );
    node.appendChild(element('h3', 'Your servers'));
    node.appendChild(
      table(
        ['server', 'pool', 'GPUs', 'node', 'state'],
        model.servers.map(s => [
          serverLink(s),
          s.pool || '—',
          s.gpus === null || s.gpus === undefined ? '—' : String(s.gpus),
          s.node || '—',
          (s.state || '') + (s.over_quota ? ' (over quota)' : '')
        ])
      )
    );
  }

  private _model: GPUPoolModel;
}
