"""marin's research environment on Google Cloud, as a Pulumi program; `program.provision` builds it."""
