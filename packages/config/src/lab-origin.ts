/**
 * Each workspace's JupyterLab on an origin of its own (LAB_ORIGIN, decision 0263): a host name per
 * workspace, `{workspace}` being the workspace's id as the first label of the host
 * (`https://{workspace}.labs.example.com`). The one copy of the rule that turns a workspace into
 * its lab's origin and a host back into its workspace: the settings check it, the gateway routes
 * by it, the runtime writes the lab page's policy by it.
 */

/** LAB_ORIGIN as the platform uses it. */
export interface LabOrigins {
  /** `http:` or `https:`. */
  protocol: 'http:' | 'https:';
  /** The host after the workspace's label, lower case, port included when not the default (`labs.example.com:8443`). */
  suffix: string;
  /** PLATFORM_ORIGIN: the platform's own origin (`https://example.com`), where a lab sends a browser to log in. */
  platform: string;
}

const PLACEHOLDER = '{workspace}';
const WORKSPACE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** A host name (labels of letters, digits and hyphens), optionally with a port. */
const HOST = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*(?::[0-9]{1,5})?$/;

/** A plain origin (scheme, host, port) or the reason it is not one. */
function plainOrigin(value: string): { protocol: 'http:' | 'https:'; host: string } | string {
  const m = /^(https?):\/\/([^/?#@\\]+)\/?$/i.exec(value.trim());
  if (!m) return 'is not an origin (scheme and host, with no path)';
  const host = m[2]!.toLowerCase();
  if (!HOST.test(host)) return 'does not name a host (letters, digits, hyphens and dots, and a port)';
  return { protocol: `${m[1]!.toLowerCase()}:` as 'http:' | 'https:', host: stripDefaultPort(host, `${m[1]!.toLowerCase()}:`) };
}

function stripDefaultPort(host: string, protocol: string): string {
  if (protocol === 'http:' && host.endsWith(':80')) return host.slice(0, -3);
  if (protocol === 'https:' && host.endsWith(':443')) return host.slice(0, -4);
  return host;
}

/**
 * LAB_ORIGIN and PLATFORM_ORIGIN as settings give them: undefined when LAB_ORIGIN is unset, the
 * problems when they are not usable (each names the fix).
 */
export function parseLabOrigins(labOrigin: string | undefined, platformOrigin: string | undefined): LabOrigins | undefined | { problems: string[] } {
  if (labOrigin === undefined) return undefined;
  const problems: string[] = [];
  const example = 'e.g. LAB_ORIGIN=https://{workspace}.labs.example.com';
  const m = /^(https?):\/\/\{workspace\}\.(.+)$/i.exec(labOrigin.trim());
  let suffix: string | undefined;
  let protocol: 'http:' | 'https:' | undefined;
  if (!m || m[2]!.includes(PLACEHOLDER)) {
    problems.push(`LAB_ORIGIN must start with the scheme and then ${PLACEHOLDER}. as the first label of the host, once (${example})`);
  } else {
    const parsed = plainOrigin(`${m[1]}://${m[2]}`);
    if (typeof parsed === 'string') problems.push(`LAB_ORIGIN ${parsed} after ${PLACEHOLDER}. (${example})`);
    else ({ protocol, host: suffix } = parsed);
    // The labs' cookies are `Secure` (`__Host-`): browsers keep them over https, and on localhost.
    if (protocol === 'http:' && suffix !== undefined && !/(^|\.)localhost(:[0-9]+)?$/.test(suffix)) {
      problems.push(`LAB_ORIGIN must be https (browsers keep the labs' secure cookies only there, or under localhost on one machine) (${example})`);
    }
  }
  let platform: string | undefined;
  if (platformOrigin === undefined) {
    problems.push('LAB_ORIGIN needs PLATFORM_ORIGIN: the origin users open the platform at (e.g. https://example.com), where a lab sends them to log in');
  } else {
    const parsed = plainOrigin(platformOrigin);
    if (typeof parsed === 'string') problems.push(`PLATFORM_ORIGIN ${parsed} (e.g. https://example.com)`);
    else {
      platform = `${parsed.protocol}//${parsed.host}`;
      if (suffix !== undefined && labWorkspaceOfHost({ protocol: protocol!, suffix, platform }, parsed.host) !== undefined) {
        problems.push('PLATFORM_ORIGIN is one of the labs’ hosts; give the platform a host name of its own');
      } else if (suffix !== undefined && sameSite(hostName(parsed.host), hostName(suffix))) {
        problems.push(
          `LAB_ORIGIN's hosts share a parent domain with PLATFORM_ORIGIN (${hostName(parsed.host)}): a page of a lab, where outputs run their scripts, ` +
            'could set a session cookie for that domain which the platform would read first; put the labs under a domain of their own ' +
            '(e.g. LAB_ORIGIN=https://{workspace}.example-labs.net with PLATFORM_ORIGIN=https://example.com; on one machine http://{workspace}.lab.localhost:8080 with http://127.0.0.1:8080)',
        );
      }
    }
  }
  if (problems.length > 0 || suffix === undefined || protocol === undefined || platform === undefined) return { problems };
  return { protocol, suffix, platform };
}

/** A host without its port. */
const hostName = (host: string) => host.replace(/:[0-9]+$/, '');

/**
 * Whether the platform's host and the labs' shared suffix are in one site as far as cookies go: the
 * same name, one a parent of the other, or the same last two labels (the registrable domain as
 * most names have it; a name under a two-label public suffix such as `co.uk` is judged by the
 * suffix, which refuses more than it must, never less). An IP address shares no parent.
 */
function sameSite(platformHost: string, labSuffix: string): boolean {
  if (/^[0-9.]+$/.test(platformHost)) return false;
  if (platformHost === labSuffix || labSuffix.endsWith(`.${platformHost}`) || platformHost.endsWith(`.${labSuffix}`)) return true;
  const lastTwo = (h: string) => h.split('.').slice(-2).join('.');
  return platformHost.includes('.') && labSuffix.includes('.') && lastTwo(platformHost) === lastTwo(labSuffix);
}

/** The origin of a workspace's JupyterLab (`https://<id>.labs.example.com`). */
export function labOriginOf(origins: LabOrigins, workspaceId: string): string {
  return `${origins.protocol}//${workspaceId.toLowerCase()}.${origins.suffix}`;
}

/**
 * The workspace whose lab a host is (`<id>.<suffix>`, compared as a browser writes hosts: lower
 * case, the default port left out), or undefined when the host is not a lab's.
 */
export function labWorkspaceOfHost(origins: LabOrigins, host: string | undefined): string | undefined {
  if (host === undefined) return undefined;
  const h = stripDefaultPort(host.toLowerCase(), origins.protocol);
  const dot = h.indexOf('.');
  if (dot < 0 || h.slice(dot + 1) !== origins.suffix) return undefined;
  const id = h.slice(0, dot);
  return WORKSPACE_ID.test(id) ? id : undefined;
}

/**
 * Whether a host is under the labs' domain: a lab's, or any other name there (a wildcard DNS entry
 * sends every name there, and none may serve the platform, same-site with every lab, where a lab's
 * page could plant cookies). The gateway sends such requests past its fast path, to the labs' rules.
 */
export function underLabsDomain(origins: LabOrigins | undefined, host: string | undefined): boolean {
  if (origins === undefined || host === undefined) return false;
  const bare = (h: string) => hostName(h.toLowerCase()).replace(/\.$/, '');
  const [name, suffix] = [bare(host), bare(origins.suffix)];
  return name === suffix || name.endsWith(`.${suffix}`);
}
