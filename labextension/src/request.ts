/**
 * `requestAPI`: one request to this server's `/gpupool/...` routes, with JupyterLab's
 * settings (base URL, XSRF, the server's authentication). An answer that is not this
 * extension's (the hub's 404 page once the server is gone) is a `ServerGoneError`, and its page
 * is never an error's message.
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { ServerGoneError, goneAnswer } from './stopped';

export async function requestAPI<T = any>(route: string, init: RequestInit = {}): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const url = URLExt.join(settings.baseUrl, 'gpupool', route);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  const text = await response.text();
  let data: any = text;
  let json = false;
  if (text.length > 0) {
    try {
      data = JSON.parse(text);
      json = true;
    } catch {
      // not JSON: the hub's or the proxy's page, not ours
    }
  }
  if (!response.ok) {
    if (goneAnswer(response.status, json)) {
      throw new ServerGoneError(response.status);
    }
    // a page that is not ours is never shown whole: its status says enough
    const message = (json && data && data.message) || `${response.status} ${response.statusText}`;
    throw new ServerConnection.ResponseError(response, message);
  }
  return data as T;
}
