/**
 * The tigera operator's image on an air-gapped cluster (issue 31, item 5). Such a site pulls every image from a mirror:
 * the operator Deployment's image re-pointed (`registry.example.internal/tigera/operator:v1.32.10` instead of
 * `quay.io/tigera/operator:v1.32.10`) and the Installation's `registry`/`imagePath`/`imagePrefix` set for the images
 * the operator renders. A plan that applied the target's tigera-operator.yaml as released would roll the operator to
 * quay.io's image, which such a cluster cannot pull: the operator stays down and the upgrade times out half done.
 *
 * So the plan re-points the target operator image to the same mirror, in the same path shape: the live image's
 * repository must end with the release's repository path (`tigera/operator`), and what precedes it is the mirror.
 * What cannot be derived that way (another path, a retagged image, a digest with no known version) is refused by
 * name instead of guessed: the user can name the image in a copy of the target's tigera-operator.yaml (--manifests).
 * The Installation's image settings need nothing here: the plan's Installation transforms only remove fields the
 * target's schema lacks, and every operator release since 3.26 has `registry`, `imagePath` and `imagePrefix`.
 */
import { imageTag, OPERATOR_DEPLOYMENT, OPERATOR_NAMESPACE, tagVersion } from '../calico/knowledge.js';
import { RefusedError } from '../core/errors.js';
import type { KubeObject } from '../kube/types.js';
import type { PlanFinding } from './types.js';

/** Where every shipped release's tigera-operator.yaml pulls the operator from. */
export const UPSTREAM_OPERATOR_REGISTRY = 'quay.io';

const HINT =
  "copy the target release's tigera-operator.yaml into a folder, set the tigera-operator Deployment's image to the one your mirror serves, and pass that folder with --manifests (from 3.30 with operator-crds.yaml beside it)";

/** `host/path/name:tag@sha256:..` -> `host/path/name` (a registry's :port is not a tag). */
function repositoryOf(image: string): string {
  const name = image.split('@')[0]!;
  const tag = imageTag(name);
  return tag === undefined ? name : name.slice(0, name.length - tag.length - 1);
}

/** `quay.io/tigera/operator` -> `tigera/operator`: the path under the registry. */
function pathUnderRegistry(repository: string): string {
  const first = repository.split('/')[0]!;
  const hasRegistry = repository.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  return hasRegistry ? repository.slice(first.length + 1) : repository;
}

/**
 * A digest names no release (the shipped manifests name tags only): when nothing else in the cluster says which one
 * runs (ClusterInformation, another image's tag), a plan would not know what it upgrades from. Refused (exit 5).
 */
export function refusePinnedWithoutVersion(workload: string, image: string | undefined, version: string | undefined): void {
  if (version || !image || !image.includes('@') || imageTag(image) !== undefined) return;
  const digest = image.slice(image.indexOf('@') + 1);
  throw new RefusedError(
    `the image ${image} of ${workload} is pinned by digest and nothing in the cluster names its Calico release: the plan cannot tell what it upgrades from; no plan was made`,
    { hint: `name the tag beside the digest in ${workload}'s image (${repositoryOf(image)}:<tag>@${digest}), then plan again` },
  );
}

export interface OperatorImagePlan {
  /** The operator image the target's tigera-operator.yaml is applied with, and the one wait-rollout waits for. */
  image: string | undefined;
  /** Set when the image was re-pointed to the live install's mirror. */
  finding?: PlanFinding;
}

/**
 * The target operator image for this cluster: the release's own when the live operator comes from the same
 * repository (or the user's --manifests already name another registry), else the release's path and tag under the
 * live image's mirror. Refuses (exit 5) when the mirror's path shape or the live image's release cannot be told.
 */
export function planOperatorImage(live: { image?: string; version?: string }, target: { version: string; operatorImage?: string }): OperatorImagePlan {
  const released = target.operatorImage;
  if (!live.image || !released) return { image: released };
  const liveRepo = repositoryOf(live.image);
  const releasedRepo = repositoryOf(released);
  const liveTag = imageTag(live.image);
  const digest = live.image.includes('@') ? live.image.slice(live.image.indexOf('@') + 1) : undefined;
  refusePinnedWithoutVersion('the tigera-operator Deployment', live.image, live.version);
  // The same repository (no mirror), or a target manifest the user already pointed elsewhere: take it as it is.
  if (liveRepo === releasedRepo || releasedRepo.split('/')[0] !== UPSTREAM_OPERATOR_REGISTRY) return { image: released };
  const releasedPath = pathUnderRegistry(releasedRepo);
  const releasedTag = imageTag(released)!;
  const mirror = liveRepo === releasedPath ? '' : liveRepo.endsWith(`/${releasedPath}`) ? liveRepo.slice(0, -releasedPath.length - 1) : undefined;
  if (mirror === undefined) {
    throw new RefusedError(
      `the operator image ${live.image} comes from another repository than ${releasedRepo} and its path does not end in ${releasedPath}: the target operator's image in that mirror cannot be derived, and ${released} may not be pullable there; no plan was made`,
      { hint: HINT },
    );
  }
  // A mirror that retags (`v1.32.10-mirror.1`) names the target's image its own way: not ours to guess.
  // An image with neither tag nor digest is `latest`.
  const shownTag = liveTag ?? (digest ? undefined : 'latest');
  if (shownTag && shownTag !== tagVersion(shownTag)?.version) {
    throw new RefusedError(
      `the operator image ${live.image} carries a retagged tag ${shownTag}: the target operator's tag in that mirror cannot be derived from ${releasedTag}; no plan was made`,
      { hint: HINT },
    );
  }
  const image = `${mirror ? `${mirror}/` : ''}${releasedPath}:${releasedTag}`;
  const details = [`live operator image ${live.image}`, `${target.version}'s tigera-operator.yaml: ${released}`];
  if (digest)
    details.push(
      `the live image is pinned by digest ${digest}; the target is named by its tag ${releasedTag} (pin it by your mirror's digest afterwards if your policy requires digests)`,
    );
  return {
    image,
    finding: {
      id: 'operator-image-mirror',
      severity: 'info',
      title: `operator image from mirror ${mirror || 'docker.io'}: ${image} instead of ${released}`,
      objects: [`Deployment/${OPERATOR_NAMESPACE}/${OPERATOR_DEPLOYMENT}`],
      details,
      action: 'transform',
      plan: `the target's tigera-operator.yaml is applied with ${image} and wait-rollout waits for it; the Installation's registry/imagePath/imagePrefix are kept`,
    },
  };
}

/**
 * The target's tigera-operator.yaml objects with the operator image the plan chose. The plan is signed, yet its image
 * must still be the release's tag: a plan naming another operator release is refused rather than rolled out.
 */
export function withPlannedOperatorImage(objs: KubeObject[], planned: string | undefined, released: string | undefined): KubeObject[] {
  if (!planned || !released || planned === released) return objs;
  if (imageTag(planned) !== imageTag(released)) {
    throw new RefusedError(`the plan's operator image ${planned} is not the target release's operator ${imageTag(released)}: make a new plan`);
  }
  return objs.map((o) => {
    if (o.kind !== 'Deployment' || o.metadata.name !== OPERATOR_DEPLOYMENT) return o;
    const out = structuredClone(o);
    for (const c of out.spec?.template?.spec?.containers ?? []) if (c.image === released) c.image = planned;
    return out;
  });
}
