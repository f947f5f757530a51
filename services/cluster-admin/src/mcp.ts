import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { OutboundError, type OutboundClient } from '@codeagent/safe-fetch';
import { NotFoundError } from '@codeagent/service-kit';
import { toClusterDto, type ClusterService } from './domain/clusters.js';
import { NAME_MAX } from './domain/schemas.js';
import type { RateLimiter } from './domain/rate-limit.js';
import { RequestRefusedError, clusterRequestUrl } from './domain/request-url.js';
import { redactBaseUrl } from './domain/base-url.js';

const text = (value: unknown) => ({ content: [{ type: 'text' as const, text: typeof value === 'string' ? value : JSON.stringify(value, null, 2) }] });
const failure = (message: string) => ({ content: [{ type: 'text' as const, text: message }], isError: true });

/** Response headers an agent may see: never cookies or auth challenges of the cluster. */
const HIDDEN_HEADERS = new Set(['set-cookie', 'www-authenticate', 'authorization', 'proxy-authenticate']);

/** What a password shorter than this is not looked for in a cluster's answer: it cannot be told from the answer's own text. */
const SHORTEST_HIDDEN_PASSWORD = 4;

/**
 * `value` with the cluster's credentials it carries replaced by `***`: a cluster that echoes its
 * requests (or a host it redirects to, which gets the same `Authorization`, SPEC §8.5) would hand
 * the agent the stored password, and no secret appears in a tool result (SPEC §8.4). Both the
 * header's Base64 form and the password itself (from SHORTEST_HIDDEN_PASSWORD characters).
 */
export function withoutCredentials(value: string, auth: { type: string; username?: string; password?: string }): string {
  if (auth.type !== 'basic' || !auth.password) return value;
  const secrets = [Buffer.from(`${auth.username ?? ''}:${auth.password}`).toString('base64')];
  if (auth.password.length >= SHORTEST_HIDDEN_PASSWORD) secrets.push(auth.password);
  // As an echo writes them back too: inside a JSON string (`"` and `\` escaped, and `/` as `\/`
  // by PHP's json_encode; Base64 holds `/`), and percent-encoded in a URL (hostile review).
  // Longest first, so that no shorter form leaves part of a longer one behind.
  const forms = new Set<string>();
  for (const secret of secrets) {
    const json = JSON.stringify(secret).slice(1, -1);
    for (const form of [secret, json, json.replaceAll('/', '\\/'), encodeURIComponent(secret)]) forms.add(form);
  }
  return [...forms].sort((a, b) => b.length - a.length).reduce((out, secret) => out.split(secret).join('***'), value);
}

/**
 * The MCP server of `/mcp` (docs/contract/spec.md §8.4): three tools over the cluster records. A fresh server per
 * request (stateless Streamable HTTP). Results never carry secrets: clusters are shown as their
 * public record (`has_password`, never the password), and the auth query parameter is removed
 * from the final URL.
 */
/** What the cluster service counts (metrics): refusals before or instead of an outbound request, by code. */
export interface McpEvents {
  outboundRefused?(code: string): void;
}

export function buildMcpServer(clusters: ClusterService, outbound: OutboundClient, limiter: RateLimiter, events: McpEvents = {}): McpServer {
  const server = new McpServer({ name: 'codeagent-cluster-admin', version: '0.1.0' });

  server.registerTool('list_clusters', { title: 'List clusters', description: 'The registered compute clusters (no secrets).', inputSchema: {} }, async () =>
    text({ clusters: await clusters.list() }),
  );

  server.registerTool(
    'get_cluster',
    {
      title: 'Get a cluster',
      description: 'One cluster by id or name (no secrets).',
      inputSchema: { cluster: z.string().min(1).max(NAME_MAX).describe('cluster id or name') },
    },
    async ({ cluster }) => {
      try {
        return text(toClusterDto(await clusters.row(cluster)));
      } catch (err) {
        if (err instanceof NotFoundError) return failure(`cluster ${cluster} not found`);
        throw err;
      }
    },
  );

  server.registerTool(
    'cluster_request',
    {
      title: 'Request a cluster endpoint',
      description: "GET or HEAD `base_url + path` of a cluster through the guarded outbound client, with the cluster's auth and rate limit.",
      inputSchema: {
        cluster: z.string().min(1).max(NAME_MAX).describe('cluster id or name'),
        method: z.enum(['GET', 'HEAD']),
        path: z
          .string()
          .max(2048)
          .describe('path below the cluster base URL, e.g. /ws/v1/cluster/info (no .. segments, no ? or #: query parameters go in `query`)'),
        query: z.record(z.string(), z.string()).optional(),
      },
    },
    async ({ cluster, method, path, query }) => {
      let row;
      try {
        row = await clusters.row(cluster);
      } catch (err) {
        if (err instanceof NotFoundError) return failure(`cluster ${cluster} not found`);
        throw err;
      }
      let url: URL;
      try {
        url = clusterRequestUrl(row.base_url, path, query, row.auth_type === 'simple' ? ['user.name'] : []);
      } catch (err) {
        if (err instanceof RequestRefusedError) {
          events.outboundRefused?.('invalid_path');
          return failure(`request refused (invalid_path): ${err.message}; no request was sent`);
        }
        throw err;
      }
      if (!(await limiter.take(row.id, row.rate_limit))) {
        events.outboundRefused?.('rate_limited');
        return failure(`rate limit of cluster ${row.name} reached: ${row.rate_limit} requests per minute; no request was sent, try again later`);
      }
      const auth =
        row.auth_type === 'simple'
          ? { type: 'simple' as const, username: row.username ?? '' }
          : row.auth_type === 'basic'
            ? { type: 'basic' as const, username: row.username ?? '', password: clusters.password(row) }
            : { type: 'none' as const };
      try {
        const res = await outbound.fetch(url.toString(), { method, auth });
        const finalUrl = new URL(res.finalUrl);
        finalUrl.searchParams.delete('user.name');
        const hide = (value: string) => withoutCredentials(value, auth);
        const headers = Object.fromEntries(
          Object.entries(res.headers)
            .filter(([k]) => !HIDDEN_HEADERS.has(k))
            .map(([k, v]) => [k, hide(v)]),
        );
        return text({
          status: res.status,
          headers,
          body: hide(res.body),
          truncated: res.truncated,
          final_url: hide(redactBaseUrl(finalUrl.toString())),
          redirects: res.redirects,
        });
      } catch (err) {
        if (err instanceof OutboundError) {
          events.outboundRefused?.(err.code);
          return failure(`request refused (${err.code}): ${err.message}`);
        }
        return failure(`request failed: ${(err as Error).message}`);
      }
    },
  );

  return server;
}
