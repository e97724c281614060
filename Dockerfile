# FlashAttention Lab for a classroom or a talk: the app, nginx and scripts/serve.sh in one
# image on NVIDIA's CUDA runtime (the driver comes from the host through the NVIDIA
# container toolkit; CuPy brings NVRTC and cuBLAS as wheels, so no CUDA toolkit is needed).
#
#   docker build -t fa-lab .
#   docker run --gpus all -p 8501:8501 fa-lab                      # one process per core
#   docker run --gpus all -p 8501:8501 -e FA_LAB_REPLICAS=8 fa-lab
#
# Without a GPU the same image serves the CPU emulation.
FROM nvidia/cuda:12.6.3-runtime-ubuntu24.04

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv nginx tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 lab

WORKDIR /app
# requirements/gpu.lock: the app's packages and CuPy, exact versions with hashes (it holds
# all of requirements/app.lock, and setuptools for the editable install below)
COPY requirements/ requirements/
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-cache-dir --require-hashes --no-deps -r requirements/gpu.lock
COPY . .
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps --no-build-isolation -e . \
 && chown -R lab /app

USER lab
ENV FA_LAB_GPU_LOCK=/tmp/fa_lab_gpu.lock PYTHONDONTWRITEBYTECODE=1
EXPOSE 8501
HEALTHCHECK --interval=15s --timeout=5s CMD python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8501/healthz', timeout=4)" || exit 1
# tini reaps and forwards signals; serve.sh stops its app processes and nginx on SIGTERM.
ENTRYPOINT ["tini", "--", "bash", "scripts/serve.sh", "--python", "/opt/venv/bin/python"]
CMD ["--port", "8501"]
