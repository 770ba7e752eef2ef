/**
 * The bundle format version, separate from the tool version. Readers accept the same major and refuse a
 * newer major (a bundle written by a future cni-rewind whose layout they cannot trust).
 */
export const BUNDLE_FORMAT_VERSION = '2.1.0';
/** The oldest major this cni-rewind still reads (1.x: one file per object). */
export const OLDEST_READ_MAJOR = 1;
/** 1.1: encrypted files carry their path as associated data and the manifest of an encrypted bundle has a MAC. */
/** 2.0: a kind with more objects than one list page is one packed `.jsonl` file (FileEntry.objects); 1.x readers cannot read it. */
/** 2.1: an etcd-datastore bundle (manifest `datastore`, `etcd/ipam.jsonl`); a 2.0 reader sees no resources in it and restores nothing. */

/**
 * How deep an object in a bundle may nest. Calico's deepest shipped CRD (the operator's, with its schema) nests 36
 * levels; the code that walks objects recurses, and an object 5,000 deep crashed restore and diff.
 */
export const MAX_OBJECT_DEPTH = 100;
