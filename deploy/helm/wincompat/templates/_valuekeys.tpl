{{- /*
Generated from values.schema.json by UPDATE_GOLDEN=1 go test ./policy -run TestChartValueKeys: do not
edit. The keys the chart knows at each level, for values-check.yaml: an object names its keys, a list
[item] the keys of its items, null a value whose keys are not the chart's (Kubernetes shapes, global).
*/ -}}
{{- define "wincompat.valueKeys" -}}
{
 "antiAffinity": null,
 "criticalPodsQuota": null,
 "enabled": null,
 "engine": null,
 "global": null,
 "health": {
  "port": null
 },
 "image": {
  "pullPolicy": null,
  "pullSecrets": null,
  "repository": null,
  "tag": null
 },
 "imageResolver": {
  "allowPrivateNetworks": null,
  "azureCloud": null,
  "bytesInFlight": null,
  "cloudCredentials": null,
  "ecrRegions": null,
  "enabled": null,
  "gateTimeout": null,
  "maxLookups": null,
  "maxLookupsPerRegistry": null,
  "mode": null,
  "podPullSecrets": null,
  "pullSecret": null,
  "pullSecretNamespaces": null,
  "tagTTL": null,
  "timeout": null
 },
 "linuxByDefault": {
  "allNamespaces": null,
  "excludedNamespaces": null,
  "failurePolicy": null
 },
 "logLevel": null,
 "metrics": {
  "dashboard": {
   "enabled": null,
   "label": null,
   "labelValue": null
  },
  "port": null,
  "prometheusRule": {
   "enabled": null,
   "labels": null
  },
  "serviceMonitor": {
   "enabled": null,
   "interval": null,
   "labels": null
  }
 },
 "misplacedPods": {
  "remediate": {
   "enabled": null,
   "ownerWindow": null,
   "perMinute": null
  },
  "watch": null
 },
 "networkPolicy": {
  "apiServerCIDRs": null,
  "apiServerPeers": null,
  "enabled": null,
  "prometheus": {
   "namespaceSelector": null,
   "podSelector": null
  }
 },
 "nodeSelector": null,
 "podDisruptionBudget": {
  "minAvailable": null
 },
 "podLabels": null,
 "policy": {
  "arch": null,
  "builds": [
   {
    "build": null,
    "imageTags": null,
    "names": null,
    "runtimeClassName": null
   }
  ],
  "defaultBuild": null,
  "excludedNamespaces": null,
  "imagesWithoutWindows": null,
  "inferOSFromNodeSelector": null,
  "injectorOptOuts": null,
  "linuxByDefault": null,
  "linuxByDefaultExcludedNamespaces": null,
  "memoryLimits": {
   "default": null,
   "fromRequests": null
  },
  "mode": null,
  "nonRootUserName": null,
  "podImagePullSecrets": null,
  "podSecurityRestricted": null,
  "registryMirrors": [
   {
    "airGapped": null,
    "mirrors": [
     {
      "capabilities": null,
      "host": null,
      "repositoryPrefix": null
     }
    ],
    "registry": null
   }
  ],
  "runtimeClassHandler": null,
  "runtimeClassesFor": null,
  "setRuntimeClassName": null,
  "userForRunAsNonRoot": null,
  "windowsCompatibility": null,
  "windowsNodeTaints": [
   {
    "effect": null,
    "key": null,
    "value": null
   }
  ]
 },
 "priorityClassName": null,
 "replicaCount": null,
 "resources": null,
 "runtimeClasses": {
  "manage": null,
  "names": null
 },
 "serviceAccount": {
  "annotations": null
 },
 "tls": {
  "certManager": {
   "duration": null,
   "renewBefore": null
  },
  "minVersion": null,
  "mode": null,
  "secretName": null
 },
 "tolerations": null,
 "uninstall": {
  "ungatePods": null
 },
 "webhook": {
  "clientAuth": {
   "caConfigMap": null,
   "caKey": null,
   "names": null
  },
  "excludedNamespaces": null,
  "failurePolicy": null,
  "maxConnections": null,
  "maxReviewBytesInFlight": null,
  "port": null,
  "readTimeout": null,
  "timeoutSeconds": null
 }
}
{{- end -}}
