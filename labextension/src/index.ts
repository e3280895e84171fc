/**
 * jupyter-gpupool: a status bar item showing the GPU pool this server runs in; a click opens a
 * side panel with pool availability and the user's servers. The server's notices are announced
 * as JupyterLab notifications, and the open documents are saved before a stop (src/savework.ts).
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { IStatusBar } from '@jupyterlab/statusbar';

import { GPUPoolModel } from './model';
import { GPUPoolPanel } from './panel';
import { requestAPI } from './request';
import { watchStops } from './savework';
import { GPUPoolStatus } from './status';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'jupyter-gpupool:status',
  description: 'The GPU pool this server runs in, pool availability and your servers.',
  autoStart: true,
  optional: [IStatusBar],
  activate: (app: JupyterFrontEnd, statusBar: IStatusBar | null) => {
    const model = new GPUPoolModel({ fetch: route => requestAPI(route) });
    // before a stop the documents are saved, with or without a status bar
    watchStops(app, model, report =>
      requestAPI('saved', { method: 'POST', body: JSON.stringify(report) })
    );
    void model.poll.start();
    if (!statusBar) {
      return;
    }
    let panel: GPUPoolPanel | null = null;
    const open = () => {
      if (!panel || panel.isDisposed) {
        panel = new GPUPoolPanel(model);
        app.shell.add(panel, 'right', { rank: 900 });
      }
      app.shell.activateById(panel.id);
    };
    const item = new GPUPoolStatus(model, open);
    statusBar.registerStatusItem(plugin.id, {
      item,
      align: 'left',
      rank: 100,
      isActive: () => true
    });
  }
};

export default plugin;
