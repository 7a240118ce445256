/** The one check of an etcd member's URL, for the config (with the key) and the client (a TypeError). */

/**
 * A member's client URL: a bare origin, `https://` when TLS is given (`http://` otherwise
 * allowed). `problem` is one phrase after the quoted URL, for the config's and the client's errors.
 */
export function etcdEndpoint(e: string, tls: boolean): { readonly origin: string } | { readonly problem: string } {
  let u: URL;
  try {
    u = new URL(e);
  } catch {
    return { problem: `${JSON.stringify(e)} is not a URL (http://host:port or https://host:port)` };
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    return { problem: `${JSON.stringify(e)} must be http://host:port or https://host:port` };
  if (u.protocol === 'http:' && tls)
    return { problem: `${JSON.stringify(e)} is http:// but store.tls is given: use https:// for every member` };
  if ((u.pathname !== '/' && u.pathname !== '') || u.search !== '' || u.username !== '' || u.password !== '')
    return { problem: `${JSON.stringify(e)} must be a bare origin http://host:port (no path, query or credentials)` };
  return { origin: u.origin };
}
