package policy

import "testing"

func TestBuildOfImage(t *testing.T) {
	p := Default()
	for image, want := range map[string]string{
		"mcr.microsoft.com/windows/servercore:ltsc2019":                                                    "10.0.17763",
		"mcr.microsoft.com/windows/nanoserver:ltsc2022":                                                    "10.0.20348",
		"mcr.microsoft.com/windows/server:ltsc2025":                                                        "10.0.26100",
		"mcr.microsoft.com/windows/nanoserver:1809":                                                        "10.0.17763",
		"mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022":                              "10.0.20348",
		"mcr.microsoft.com/dotnet/framework/aspnet:4.8-windowsservercore-ltsc2019":                         "10.0.17763",
		"mcr.microsoft.com/windows/servercore:10.0.20348.2031":                                             "10.0.20348",
		"mcr.microsoft.com/windows/servercore:10.0.26100.1742-amd64":                                       "10.0.26100",
		"example.com/app:10.0.99999":                                                                       "10.0.99999", // well-formed, not in the catalog
		"example.com/app:LTSC2022":                                                                         "10.0.20348",
		"example.com/app:1.0_ltsc2019":                                                                     "10.0.17763",
		"example.com/app:ltsc2022@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945": "10.0.20348",
		// No inference:
		"example.com/app@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945": "",
		"example.com/app":                 "",
		"registry.example.com:5000/app":   "",
		"example.com/app:2022-01-01":      "", // a date is not a build
		"example.com/app:2019":            "", // year-only names are for humans, not tags
		"example.com/ltsc2022/app:latest": "", // only the tag counts
		"example.com/app:v1809":           "",
	} {
		b, ok := p.BuildOfImage(image)
		if got := b.Number; got != want || ok != (want != "") {
			t.Errorf("BuildOfImage(%q) = %q, %v; want %q", image, got, ok, want)
		}
	}
}

func TestLookupBuildAcceptsNumbersAndNames(t *testing.T) {
	p := Default()
	for in, want := range map[string]string{"10.0.20348": "10.0.20348", "ltsc2022": "10.0.20348", "2022": "10.0.20348", " LTSC2019 ": "10.0.17763", "1809": "10.0.17763"} {
		if b, ok := p.lookupBuild(in); !ok || b.Number != want {
			t.Errorf("lookupBuild(%q) = %q, %v", in, b.Number, ok)
		}
	}
	if _, ok := p.lookupBuild("ltsc2016"); ok {
		t.Error("ltsc2016 is not in the default catalog")
	}
}
