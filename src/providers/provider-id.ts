/**
 * Kubernetes `spec.providerID` parsing: which provider a node belongs to and where its machine is.
 *   aws:///us-east-1a/i-0abc         -> aws, zone us-east-1a, region us-east-1, instance i-0abc
 *   gce://my-project/europe-west1-b/node-1 -> gcp, project, zone, instance name
 */
export type ProviderIdInfo =
  | { provider: 'aws'; zone: string; region: string; instanceId: string }
  | { provider: 'gcp'; project: string; zone: string; instance: string }
  | { provider: 'unknown'; raw?: string };

export function parseProviderId(providerID: string | undefined): ProviderIdInfo {
  if (!providerID) return { provider: 'unknown' };
  let m = /^aws:\/\/\/?([a-z0-9-]+)?\/(i-[0-9a-f]+)$/.exec(providerID);
  if (m) {
    const zone = m[1] ?? '';
    // Region = zone minus its trailing letter (us-east-1a -> us-east-1); local zones keep their prefix.
    const region = zone.replace(/[a-z]$/, '');
    return { provider: 'aws', zone, region, instanceId: m[2]! };
  }
  m = /^gce:\/\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(providerID);
  if (m) return { provider: 'gcp', project: m[1]!, zone: m[2]!, instance: m[3]! };
  return { provider: 'unknown', raw: providerID };
}
