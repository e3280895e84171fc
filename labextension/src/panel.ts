/**
 * The side panel: this server (with what its GPUs do), pool availability (free GPUs, the
 * user's quota, the pool's state) and the user's servers (with their GPUs' utilization and
 * idle time). The model asks for pools and servers only while it is shown.
 */

import { Widget } from '@lumino/widgets';

import { GPUPoolModel, IPool, IServer, idleCell, percent } from './model';
import {
  freeEquivalents,
  freeWords,
  poolState,
  quotaWords,
  serverGPUs,
  serverState
} from './panelwords';

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

/**
 * A table of `rows`; a cell is text, a node, or several of them stacked (each on a line of its
 * own), so that a narrow sidebar shows a few wrapping columns instead of many cut-off ones.
 * Each column's cells carry `jp-gpupool-col-<key>`.
 */
function table(
  columns: { key: string; title: string }[],
  rows: (string | Node | (string | Node)[])[][]
): HTMLTableElement {
  const t = element('table');
  const head = t.createTHead().insertRow();
  for (const c of columns) {
    head.appendChild(element('th', c.title, `jp-gpupool-col-${c.key}`));
  }
  const body = t.createTBody();
  for (const row of rows) {
    const tr = body.insertRow();
    row.forEach((cell, i) => {
      const td = tr.insertCell();
      td.className = `jp-gpupool-col-${columns[i].key}`;
      for (const part of Array.isArray(cell) ? cell : [cell]) {
        td.appendChild(typeof part === 'string' ? element('div', part) : part);
      }
    });
  }
  return t;
}

function bar(pool: IPool): HTMLProgressElement {
  const node = element('progress', undefined, 'jp-gpupool-bar');
  // GPU-equivalents, as every surface counts them
  node.max = Math.max(pool.gpu_total, 1);
  node.value = Math.max(0, pool.gpu_total - freeEquivalents(pool));
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

/** `text` in a div of `className`, or nothing when there is no text. */
function words(text: string | null, className: string): Node[] {
  return text ? [element('div', text, className)] : [];
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
    if (model.useLine) {
      node.appendChild(element('p', model.useLine, 'jp-gpupool-use'));
    }
    if (model.idleWords) {
      node.appendChild(
        element(
          'p',
          model.idleWords,
          model.idleWarning ? 'jp-gpupool-warning-text jp-gpupool-idle-text' : 'jp-gpupool-idle-text'
        )
      );
    }
    if (model.noticeWords) {
      node.appendChild(
        element(
          'p',
          model.noticeWords,
          model.noticeWarning ? 'jp-gpupool-warning-text jp-gpupool-notice-text' : 'jp-gpupool-notice-text'
        )
      );
    }
    if (model.status && model.status.over_quota) {
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
    // two columns that wrap: the name over its bar and free GPUs; quota over state
    node.appendChild(
      table(
        [
          { key: 'pool', title: 'pool · free GPUs' },
          { key: 'quota', title: 'your quota · state' }
        ],
        model.pools.map(p => [
          [p.name, bar(p), freeWords(p)],
          [quotaWords(p), element('div', poolState(p), 'jp-gpupool-state')]
        ])
      )
    );
    node.appendChild(element('h3', 'Your servers'));
    const now = model.now;
    node.appendChild(
      table(
        [
          { key: 'server', title: 'server · state' },
          { key: 'where', title: 'pool · node' },
          { key: 'gpus', title: 'GPUs' }
        ],
        model.servers.map(s => [
          [
            serverLink(s),
            element('div', serverState(s), 'jp-gpupool-state'),
            ...words(idleCell(s.idle, now), 'jp-gpupool-state')
          ],
          [s.pool || '—', s.node || ''],
          [
            serverGPUs(s),
            ...words(percent(s.gpu_utilization), 'jp-gpupool-state')
          ]
        ])
      )
    );
  }

  private _model: GPUPoolModel;
}
